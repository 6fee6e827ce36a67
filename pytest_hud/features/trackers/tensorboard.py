"""TensorBoard tracker: event files written with TensorBoard's own writer (no TensorFlow or
torch); sessions naming one run add event files beside each other.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from pytest_hud.features.trackers.figures import Figures

__all__ = ["TensorBoardTracker", "open_tracker"]


class TensorBoardTracker:
    name = "tensorboard"

    def __init__(self, directory: Path, run_name: str | None = None) -> None:
        folder = re.sub(r"[^A-Za-z0-9_.-]+", "_", run_name or "pytest-hud").strip("_")
        self.logdir = Path(directory) / (folder or "pytest-hud")  # one level, whatever the name
        self.logdir.mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(self.logdir))

    def log(self, figures: Figures) -> None:
        step = figures.step or 0
        values = [Summary.Value(tag=k, simple_value=v) for k, v in figures.scalars.items()]
        for tag, path in figures.media.items():
            if path.suffix.lower() in (".gif", ".png"):
                values.append(Summary.Value(tag=tag, image=_image(path)))
        if figures.config:
            text = "\n".join(f"- {k}: `{v}`" for k, v in sorted(figures.config.items()))
            values.append(_text("hud/provenance", text))
        event = Event(wall_time=time.time(), step=step, summary=Summary(value=values))
        self._writer.add_event(event)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def _image(path: Path) -> Summary.Image:
    from PIL import Image

    with Image.open(path) as im:
        width, height = im.size
    return Summary.Image(
        height=height, width=width, colorspace=3, encoded_image_string=path.read_bytes()
    )


def _text(tag: str, text: str) -> Summary.Value:
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
    tensor = TensorProto(
        dtype=7,  # DT_STRING
        string_val=[text.encode()],
        tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]),
    )
    return Summary.Value(tag=tag, metadata=meta, tensor=tensor)


def open_tracker(
    *, directory: Path, run_name: str | None = None, **_: object
) -> TensorBoardTracker:
    return TensorBoardTracker(Path(directory) / "tensorboard", run_name)
