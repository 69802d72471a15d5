"""The label sets of the detector backends, as plain data: what each can name, readable without loading a model or
the libraries that run it (a question about a kind of object asks only this)."""

from __future__ import annotations

# COCO's 80 class names in the model's output order (NanoDet trains on COCO 2017 with the usual 80-class order).
COCO_LABELS: tuple[str, ...] = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
    "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
    "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee",
    "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove", "skateboard", "surfboard",
    "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple",
    "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
    "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone",
    "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors", "teddy bear",
    "hair drier", "toothbrush",
)
# The model's 24 outputs in order, as its label map (object_detection_oidv4_labelmap.txt) names them; "???" is the
# background class. The converted file carries the same list in its metadata ("labels"), checked when it is opened.
OID_LABELS: tuple[str, ...] = (
    "???", "Bicycle", "Boot", "Laptop", "Person", "Chair", "Cattle", "Desk", "Cat", "Computer mouse",
    "Computer monitor", "Box", "Mug", "Coffee cup", "Stationary bicycle", "Table", "Bottle", "High heels", "Vehicle",
    "Footwear", "Dog", "Book", "Camera", "Car",
)
OID_TO_LABEL: dict[str, str] = {
    "Bicycle": "bicycle", "Boot": "boot", "Laptop": "laptop", "Person": "person", "Chair": "chair",
    "Cattle": "cow", "Desk": "desk", "Cat": "cat", "Computer mouse": "mouse", "Computer monitor": "tv",
    "Box": "box", "Mug": "cup", "Coffee cup": "cup", "Stationary bicycle": "stationary bicycle", "Table": "table",
    "Bottle": "bottle", "High heels": "high heels", "Vehicle": "car", "Footwear": "footwear", "Dog": "dog",
    "Book": "book", "Camera": "camera", "Car": "car",
}
SSD_LABELS: tuple[str, ...] = tuple(sorted(set(OID_TO_LABEL.values())))  # what this backend can name
OWN_LABELS = frozenset(SSD_LABELS) - frozenset(COCO_LABELS)  # names that are not COCO's (lucy.perception.ssd_oid)
