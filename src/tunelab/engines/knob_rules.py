"""What a point's knobs may be on an engine: its defaults filled in, each value and the
cross-knob rules checked, advice, and what this host cannot give the point.

Asked before any engine exists (the sweep validator, ``tunelab plan``), so an engine class
holds one ``KnobRules`` (``Engine.knob_rules``) built with its ``EngineInfo``; an engine whose
rules go beyond the single knobs' bounds gives a subclass, declared beside its knobs.
"""

from __future__ import annotations

from typing import Any

from tunelab.engines.base import EngineError, EngineInfo


class KnobRules:
    """The knob rules of the engine ``info`` declares; by default its knobs' own bounds."""

    def __init__(self, info: EngineInfo):
        self.info = info

    def check_point(self, knobs: dict[str, Any]) -> list[tuple[str, str, str]]:
        """Cross-knob rules the single-knob bounds cannot say: (field, message, allowed)."""
        return []

    def warn_point(self, knobs: dict[str, Any]) -> list[tuple[str, str]]:
        """Allowed combinations the engine's maker advises against: (field, message)."""
        return []

    def host_refusals(self, knobs: dict[str, Any]) -> list[tuple[str, str]]:
        """Knobs this host cannot give the point (e.g. a device of its own without root):
        (field, message naming the engine and the reason), asked at validation."""
        return []

    def version_refusal(self, version: str) -> str | None:
        """Why this host cannot run the engine at ``version`` (one of its declared versions:
        ``engine_version``), asked at validation before anything starts, or None."""
        return None

    def full_knobs(self, knobs: dict[str, Any]) -> dict[str, Any]:
        """The knobs with the engine's defaults filled in, each checked against its ``Knob``
        and the cross-knob rules; EngineError names the first that is not allowed."""
        info = self.info
        full = {**info.defaults(), **knobs}
        unknown = sorted(set(full) - set(info.knobs))
        if unknown:
            raise EngineError(f"{info.name} cannot express knob(s) {', '.join(unknown)}")
        for name, value in full.items():
            if (problem := info.knobs[name].check(value)) is not None:
                raise EngineError(
                    f"{info.name}: knob {name}={value!r} {problem} "
                    f"(allowed: {info.knobs[name].allowed_text()})"
                )
        for fld, msg, allowed in self.check_point(full):
            raise EngineError(f"{info.name}: knob {fld}: {msg} (allowed: {allowed})")
        return full
