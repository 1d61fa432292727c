"""JSON with a stable schema (documented in docs/json-schema.md)."""
from __future__ import annotations

import json

from ..report import report_to_dict


def render_json(report) -> str:
    return json.dumps(report_to_dict(report), indent=2) + "\n"
