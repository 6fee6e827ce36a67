"""runtime/backends.py, the one table of --hud-runtime kinds: every entry resolves to a module
with a provider, every spelling it advertises parses back to it, and the flags say what the
session does with it (boot ahead, routing by declaration, images, a session cluster)."""

from __future__ import annotations

import pytest

from pytest_hud.errors import PlacementError
from pytest_hud.runtime.backends import BACKENDS, DEFAULT, Backend, forms, parse

#: A value of each advertised form, with its placeholders filled in.
EXAMPLES = {
    "subprocess[:PYTHON]": "subprocess:/usr/bin/python3",
    "docker[:IMAGE]": "docker:my-env",
    "modal[:IMAGE]": "modal:my-env",
    "ray:HOST:PORT": "ray:127.0.0.1:6379",
    "ray://HOST:PORT": "ray://127.0.0.1:10001",
    "tcp://HOST:PORT": "tcp://127.0.0.1:7000",
    "ws://HOST:PORT": "ws://127.0.0.1:7000",
}


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_every_entry_has_a_provider_and_only_known_parts(kind: str) -> None:
    backend = BACKENDS[kind]
    assert backend.kind == kind and backend.forms
    assert callable(backend.parts.provider)
    for part in ("preflight", "reap", "address", "start_cluster", "image_digest"):
        found = getattr(backend.parts, part)
        assert found is None or callable(found), (kind, part)


@pytest.mark.parametrize("form", [f for b in BACKENDS.values() for f in b.forms])
def test_every_advertised_form_parses_back_to_its_backend(form: str) -> None:
    value = EXAMPLES.get(form, form)
    spec = parse(value)
    assert spec.raw == value and spec.backend.forms and form in spec.backend.forms
    assert form in forms()


def test_the_default_is_in_the_table_and_an_unknown_kind_names_every_form() -> None:
    assert DEFAULT in BACKENDS
    with pytest.raises(PlacementError) as caught:
        parse("k8s:cluster")
    message = str(caught.value)
    assert "unknown --hud-runtime 'k8s:cluster'" in message
    assert all(form in message for b in BACKENDS.values() for form in b.forms)


def test_the_flags_are_what_the_session_acts_on() -> None:
    from pytest_hud.runtime.placement import provider_for
    from pytest_hud.runtime.warm import spec_pool_size

    for kind in ("local", "subprocess", "docker"):
        warm = BACKENDS[kind].warm
        assert bool(getattr(provider_for(kind), "warm_ahead", False)) is warm, kind
        assert spec_pool_size(parse(kind), None, 3) == (3 if warm else 0), kind
    assert parse("docker:img").image == "img" and parse("modal:img").image == "img"
    assert parse("subprocess:/usr/bin/python3").image is None  # a python, not an image
    assert [k for k, b in BACKENDS.items() if b.builds] == ["docker"]
    assert [k for k, b in BACKENDS.items() if b.parts.start_cluster is not None] == ["ray"]
    assert [k for k, b in BACKENDS.items() if b.parts.reap is not None] == ["docker"]


def test_a_module_without_its_parts_is_one_clear_error() -> None:
    broken = Backend("nothing", ("nothing",), ".provider")  # a real module with no PARTS
    with pytest.raises(TypeError, match=r"backend 'nothing': expected .* to define PARTS"):
        broken.parts  # noqa: B018
