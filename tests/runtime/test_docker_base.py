"""The base image env images build FROM, with nothing but the engine: made from the host's
Python where no registry answers (the same image id each time), pulled where one does (a
registry served here on 127.0.0.1 from the host-made base, as Docker Hub would serve
``python:X.Y-slim``), and one clear error for a base that is neither there nor pullable.
Needs a Docker engine (fails instead under PYTEST_HUD_REQUIRE_ALL=1)."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import re
import tarfile
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import base_image

from pytest_hud.errors import BaseImageError
from pytest_hud.runtime.docker.base import build_host_base, ensure_base
from pytest_hud.runtime.docker.image import build_image

pytestmark = pytest.mark.docker


def _remove(client: Any, tag: str) -> None:
    import docker

    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.remove(tag, force=True)


def test_the_host_base_is_the_same_image_each_time_it_is_built(client: Any) -> None:
    """Rebuilt from the same interpreter, the base is the same image (so nothing built on
    it rebuilds), and it runs the host's Python with a shell and TLS."""
    tag = f"pytest-hud-test-base:{uuid.uuid4().hex[:8]}"
    try:
        build_host_base(client, tag, say=lambda _: None)
        first = client.images.get(tag).id
        _remove(client, tag)
        build_host_base(client, tag, say=lambda _: None)
        assert client.images.get(tag).id == first
        out = client.containers.run(
            tag,
            ["sh", "-c", "python3 -c 'import sys, ssl; print(sys.version_info[:2])'"],
            remove=True,
        )
        assert out.decode().strip() == str(tuple(__import__("sys").version_info[:2]))
    finally:
        _remove(client, tag)


# -- a registry on 127.0.0.1 (the engine allows plain HTTP to loopback registries) ----------
MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _image_blobs(client: Any, tag: str) -> tuple[bytes, dict[str, bytes]]:
    """``tag`` as a registry holds it: its manifest and blobs (config, gzipped layers)."""
    saved = io.BytesIO(b"".join(client.images.get(tag).save()))
    with tarfile.open(fileobj=saved) as tar:
        [entry] = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        config = tar.extractfile(entry["Config"]).read()  # type: ignore[union-attr]
        layers = [gzip.compress(tar.extractfile(p).read(), 1) for p in entry["Layers"]]  # type: ignore[union-attr]
    blobs = {_digest(b): b for b in (config, *layers)}
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": len(config),
            "digest": _digest(config),
        },
        "layers": [
            {
                "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "size": len(layer),
                "digest": _digest(layer),
            }
            for layer in layers
        ],
    }
    return json.dumps(manifest).encode(), blobs


@contextlib.contextmanager
def registry(manifests: dict[str, bytes], blobs: dict[str, bytes]) -> Iterator[str]:
    """A read-only Registry v2 on 127.0.0.1 serving ``{name:tag: manifest}`` (by tag or by
    digest, as the engine asks after a HEAD) and ``blobs``; its host:port."""
    route = re.compile(r"^/v2/(?P<name>.+)/(?P<kind>manifests|blobs)/(?P<ref>[^/]+)$")
    by_digest = {f"{key.rsplit(':', 1)[0]}:{_digest(m)}": m for key, m in manifests.items()}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, body: bytes | None, ctype: str = "application/octet-stream") -> None:
            if body is None:
                missing = b'{"errors": [{"code": "MANIFEST_UNKNOWN", "message": "not here"}]}'
                self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(missing)))
                self.end_headers()
                if self.command == "GET":
                    self.wfile.write(missing)
                return
            self.send_response(200)
            self.send_header("Docker-Distribution-API-Version", "registry/2.0")
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Docker-Content-Digest", _digest(body))
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v2":
                self._send(b"{}", "application/json")
                return
            found = route.match(self.path)
            if found is None:
                self._send(None)
            elif found["kind"] == "manifests":
                key = f"{found['name']}:{found['ref']}"
                self._send(manifests.get(key) or by_digest.get(key), MANIFEST)
            else:
                self._send(blobs.get(found["ref"]))

        do_HEAD = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_a_base_a_registry_serves_is_pulled_and_built_on(client: Any, tmp_path: Path) -> None:
    """``--hud-docker-base`` (``build_image(base=...)``) names an image the engine lacks:
    pulled from the registry that serves it, then an env image builds FROM it."""
    manifest, blobs = _image_blobs(client, base_image(client))
    name = f"hud-test/python-{uuid.uuid4().hex[:8]}"
    with registry({f"{name}:slim": manifest}, blobs) as host:
        ref = f"{host}/{name}:slim"
        tag = f"pytest-hud-test-env:{uuid.uuid4().hex[:8]}"
        lines: list[str] = []
        try:
            assert ensure_base(client, ref, say=lines.append) == ref
            assert any(f"pulling the base image {ref}" in line for line in lines), lines
            assert build_image(tag, base=ref, client=client) == tag
            history = [layer.get("Id") for layer in client.api.history(tag)]
            assert client.images.get(ref).id in history  # FROM the pulled image
        finally:
            _remove(client, tag)
            _remove(client, ref)


def test_a_base_that_is_not_there_and_cannot_be_pulled_is_one_error_naming_the_fix(
    client: Any,
) -> None:
    with registry({}, {}) as host:
        ref = f"{host}/hud-test/nothing:here"
        with pytest.raises(BaseImageError) as caught:
            ensure_base(client, ref, say=lambda _: None)
    message = str(caught.value)
    assert f"base image {ref!r} is not on this Docker engine and pulling it failed" in message
    assert "fix: docker pull" in message and "--hud-docker-base" in message


def test_hud_docker_base_belongs_to_the_docker_runtime(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("--hud-docker-base=python:3.11-slim")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--hud-docker-base=python:3.11-slim is the base of the images*"])
