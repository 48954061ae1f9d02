"""`derive_seed`: a generator's seed from the run's seed and what the generator is for."""
from __future__ import annotations

import hashlib


def derive_seed(*parts) -> int:
    """A 64-bit seed from the seed and identity parts (ints and strs); platform independent."""
    digest = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")
