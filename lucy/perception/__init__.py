"""Cheap CPU perception for the embedded captioner: scenes and cuts, people, moving things, on-screen text.

Each module is plain functions over numpy frames (RGB uint8), usable and testable on its own:
``scenes`` (cut analysis on every frame), ``people`` (HOG + face detector), ``motion`` (moving regions and
tracks across sampled frames, described in words), ``ocr`` (Tesseract or RapidOCR behind one interface).
"""
