"""Zarr v3 codecs that store each frame chunk as one JPEG or JPEG-XL image (through imagecodecs).

Video frames compress ~10x better as images than with a general-purpose compressor (see bench/ingest.py).
The codecs are registered with zarr on import, so any process that imports ``lucy.ingest`` can read a store.
Chunks must be ``(1, H, W, 3)`` uint8: one frame per chunk.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Self

import imagecodecs
import numpy as np
from zarr.abc.codec import ArrayBytesCodec
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import Buffer, NDBuffer
from zarr.core.common import JSON, parse_named_configuration
from zarr.registry import register_codec


@dataclass(frozen=True)
class _ImageCodec(ArrayBytesCodec):
    """Encodes a ``(1, H, W, 3)`` uint8 chunk as one image; subclasses pick the image format."""

    quality: int = 90
    is_fixed_size = False
    codec_name = ""

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, config = parse_named_configuration(data, cls.codec_name, require_configuration=False)
        return cls(**(config or {}))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        return {"name": self.codec_name, "configuration": {"quality": self.quality}}

    def validate(self, *, shape: tuple[int, ...], dtype: object, chunk_grid: object) -> None:
        chunk_shape = getattr(chunk_grid, "chunk_shape", None)
        if len(shape) != 4 or shape[-1] != 3 or (chunk_shape is not None and chunk_shape[0] != 1):
            raise ValueError(f"{self.codec_name} stores (N, H, W, 3) frames with one frame per chunk")

    def _encode_image(self, image: np.ndarray) -> bytes:
        raise NotImplementedError

    def _decode_image(self, data: bytes) -> np.ndarray:
        raise NotImplementedError

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        frame = np.asarray(chunk_array.as_numpy_array())[0]
        # imagecodecs releases the GIL: encoding in a thread lets zarr encode several chunks at once.
        data = await asyncio.to_thread(self._encode_image, np.ascontiguousarray(frame))
        return chunk_spec.prototype.buffer.from_bytes(data)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        image = await asyncio.to_thread(self._decode_image, chunk_bytes.to_bytes())
        if image.shape != chunk_spec.shape[1:]:
            raise ValueError(f"stored image has shape {image.shape}, expected {chunk_spec.shape[1:]}")
        return chunk_spec.prototype.nd_buffer.from_numpy_array(image[np.newaxis])

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        raise NotImplementedError("image codecs have no fixed encoded size")


@dataclass(frozen=True)
class JpegCodec(_ImageCodec):
    codec_name = "lucy.jpeg"

    # Colour resolution: "444" (full) by default. The video's own 4:2:0 already halved it, and halving it again on
    # another grid blurs the colour of letters and small objects past naming; "420" costs 20-40% fewer bytes.
    subsampling: str = "444"

    def to_dict(self) -> dict[str, JSON]:
        return {"name": self.codec_name, "configuration": {"quality": self.quality, "subsampling": self.subsampling}}

    def _encode_image(self, image: np.ndarray) -> bytes:
        return imagecodecs.jpeg8_encode(image, level=self.quality, subsampling=self.subsampling)

    def _decode_image(self, data: bytes) -> np.ndarray:
        return imagecodecs.jpeg8_decode(data)


@dataclass(frozen=True)
class JpegXlCodec(_ImageCodec):
    codec_name = "lucy.jpegxl"

    def _encode_image(self, image: np.ndarray) -> bytes:
        # effort 1 ("lightning") keeps encoding within the ingest budget; quality maps to JPEG-like scale.
        return imagecodecs.jpegxl_encode(image, level=self.quality, effort=1)

    def _decode_image(self, data: bytes) -> np.ndarray:
        return imagecodecs.jpegxl_decode(data)


register_codec(JpegCodec.codec_name, JpegCodec)
register_codec(JpegXlCodec.codec_name, JpegXlCodec)
