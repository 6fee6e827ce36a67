"""``python -m pytest_hud image base|build|ls|rm``: the images ``--hud-runtime=docker`` builds, by
hand (same tags, so a later run is a cache hit).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from pytest_hud.errors import HudError
from pytest_hud.plumbing.loader import load_module
from pytest_hud.runtime.docker.auto import REPOSITORY, declared_files, ensure_image, image_specs
from pytest_hud.runtime.docker.base import build_host_base, ensure_base
from pytest_hud.runtime.docker.engine import LABEL, _client, _sdk
from pytest_hud.runtime.docker.image import build_lock

__all__ = ["main"]


def _build(args: argparse.Namespace) -> int:
    for path in args.files:
        load_module(path)
    for name in args.pyargs:
        importlib.import_module(name)
    for spec in image_specs(declared_files()):
        print(f"image {spec.tag}", file=sys.stderr)
        for host, inside in sorted(spec.modules.items()):
            print(f"  module {host} -> {inside}", file=sys.stderr)
        print(f"  requires {list(spec.requires)}; apt {list(spec.apt)}", file=sys.stderr)
        ensure_image(spec)
        print(spec.tag)
    return 0


def _base(args: argparse.Namespace) -> int:
    def say(line: str) -> None:
        print(f"image base: {line}", file=sys.stderr)

    client = _client()
    with build_lock():
        if args.python or args.host:
            tag = build_host_base(client, args.tag, python=args.python, say=say)
        else:
            tag = ensure_base(client, args.tag, say=say)
    print(tag)
    return 0


def _images(client: Any) -> list[Any]:
    return list(client.images.list(filters={"label": f"{LABEL}.auto=1"}))


def _ls(args: argparse.Namespace) -> int:
    client = _client()
    rows = []
    for image in _images(client):
        modules = json.loads((image.labels or {}).get(f"{LABEL}.modules") or "[]")
        size = image.attrs.get("Size", 0) / 1e6
        for tag in image.tags or [f"<untagged {image.short_id}>"]:
            rows.append(f"{tag}  {size:.0f} MB  {image.attrs.get('Created', '')[:19]}  {modules}")
    print("\n".join(rows) if rows else f"no {REPOSITORY} images")
    return 0


def _rm(args: argparse.Namespace) -> int:
    client = _client()
    if args.all:
        tags = [t for image in _images(client) for t in image.tags] or []
    else:
        tags = list(args.tags)
    if not tags:
        print("image rm: expected TAG ... or --all, got nothing to remove", file=sys.stderr)
        return 2
    status = 0
    for tag in tags:
        try:
            client.images.remove(tag, force=True)
            print(f"removed {tag}")
        except _sdk().errors.DockerException as exc:
            print(f"image rm {tag}: {exc}", file=sys.stderr)
            status = 1
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_hud image", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    sub = parser.add_subparsers(dest="command", required=True)
    base = sub.add_parser(
        "base",
        help="the base image env images build FROM: python:X.Y-slim if the engine has or can "
        "pull it, else one made from this host's Python (what a docker run does on first use)",
    )
    base.add_argument("--tag", help="an image to use or pull instead (--hud-docker-base)")
    base.add_argument(
        "--host", action="store_true", help="build from this host's Python without pulling"
    )
    base.add_argument(
        "--python", help="build from this interpreter (implies --host; e.g. a 3.12 venv's)"
    )
    base.set_defaults(run=_base)
    build = sub.add_parser("build", help="build the image for env modules / task files")
    build.add_argument("files", nargs="*", help="python files declaring or importing envs")
    build.add_argument("--pyargs", nargs="+", default=[], help="dotted modules to import")
    build.set_defaults(run=_build)
    sub.add_parser("ls", help="list the built images").set_defaults(run=_ls)
    rm = sub.add_parser("rm", help="remove built images")
    rm.add_argument("tags", nargs="*")
    rm.add_argument("--all", action="store_true", help=f"every {REPOSITORY} image")
    rm.set_defaults(run=_rm)
    args = parser.parse_args(list(argv) if argv is not None else None)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("image: %(message)s"))
    for name in ("image", "auto", "base"):
        name = f"pytest_hud.runtime.docker.{name}"
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    try:
        return int(args.run(args))
    except (HudError, RuntimeError) as exc:
        print(f"python -m pytest_hud image {args.command}: {exc}", file=sys.stderr)
        return 1
