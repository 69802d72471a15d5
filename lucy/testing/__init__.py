"""Test helpers that tests, benchmarks and demos share (real servers with scripted behaviour)."""
