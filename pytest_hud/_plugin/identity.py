"""What identifies this run's episodes (agent label, checkpoint and its hash, provenance, replay
commands), computed once for the ledger, resume and results.
"""

from __future__ import annotations

import sys

import pytest

from pytest_hud._plugin.options import HudOptions
from pytest_hud.evaluation import provenance
from pytest_hud.evaluation.provenance import Provenance
from pytest_hud.runtime.backends import DEFAULT

__all__ = ["RunIdentity"]


class RunIdentity:
    """The run's agent, checkpoint and provenance (see the module docs)."""

    def __init__(self, config: pytest.Config, options: HudOptions, agent_name: str) -> None:
        self.config = config
        self.options = options
        self.agent_name = agent_name
        self._hash: str | None = None
        self._hashed = False
        #: the run's provenance (controller, with --hud-ledger or --hud-results), else None
        self.provenance: Provenance | None = None

    @property
    def label(self) -> str:
        """The name rows and tables give the agent: --hud-checkpoint, else --hud-agent."""
        return self.options.checkpoint or self.agent_name

    def checkpoint_path(self) -> str | None:
        """The checkpoint a ``lerobot:PATH`` agent loads (None for other agents)."""
        return self.options.agent.checkpoint

    def checkpoint_hash(self) -> str | None:
        """The checkpoint's content hash, once per process (None without a local one)."""
        if not self._hashed:
            self._hashed = True
            path = self.checkpoint_path()
            try:
                self._hash = None if path is None else provenance.checkpoint_hash(path)
            except (OSError, ValueError):  # a hub id, not a local folder
                self._hash = None
        return self._hash

    def collect(self) -> Provenance:
        """The run's provenance (packages, host, git, checkpoint, command), kept."""
        spec = self.options.runtime
        image = spec.image
        digest = spec.backend.parts.image_digest
        out = provenance.collect(
            suite=self.config.rootpath,
            checkpoint=None,
            image=image,
            image_digest=digest(image) if image is not None and digest is not None else None,
            seed=self.options.seed,
            command=["pytest", *self.config.invocation_params.args],
        )
        path = self.checkpoint_path()
        out["checkpoint"] = None if path is None else {"path": path, "hash": self.checkpoint_hash()}
        out["agent"] = self.options.agent.text
        if len(self.options.agents) > 1:  # a paired session: its arms and their order's seed
            out["agents"] = self.options.agent_texts
            out["ab_seed"] = self.options.ab_seed
        out["python"] = sys.version.split()[0]
        self.provenance = out
        return out

    def repro(self, nodeid: str) -> str:
        """The command that replays this one episode."""
        runtime = self.options.runtime.raw
        return provenance.repro_command(
            nodeid,
            self.options.agent.text,
            self.options.seed,
            checkpoint=self.options.checkpoint,
            runtime=None if runtime == DEFAULT else runtime,
        )
