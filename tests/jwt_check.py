"""Check an RS256 JWT (the service-account assertion google-auth posts to the token endpoint)."""

from __future__ import annotations

import base64
import json
import time
from typing import Any


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def verify(token: str, public_key: Any) -> bool:
    """True when ``token`` is signed by ``public_key`` and its claims are current."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    try:
        head, payload, sig = token.split(".")
        public_key.verify(_b64(sig), f"{head}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
        claims = json.loads(_b64(payload))
    except (ValueError, InvalidSignature):
        return False
    return claims.get("exp", 0) > time.time() and "spreadsheets" in claims.get("scope", "")
