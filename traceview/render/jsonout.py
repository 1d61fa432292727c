"""JSON with a stable schema (documented in docs/json-schema.md); raw numbers (:mod:`.raw`)."""
from __future__ import annotations

import json

from ..report import report_to_dict
from .raw import raw_report


def render_json(report) -> str:
    return json.dumps(report_to_dict(raw_report(report)), indent=2) + "\n"
