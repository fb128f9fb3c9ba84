"""What a newcomer reads first: the LICENSE and the README, checked against the code."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# SHA-256 of the Apache License 2.0 as the ASF publishes it
# (https://www.apache.org/licenses/LICENSE-2.0.txt; Debian's /usr/share/common-licenses/Apache-2.0).
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_license_file_is_the_unmodified_apache_license_pyproject_names() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["license"] in ("Apache-2.0", {"text": "Apache-2.0"})
    for table in (pyproject["project"], pyproject.get("tool", {}).get("setuptools", {})):
        assert "LICENSE" in table.get("license-files", ["LICENSE"])
    text = (ROOT / "LICENSE").read_text(encoding="utf-8").replace("\r\n", "\n")
    assert hashlib.sha256(text.encode()).hexdigest() == APACHE_2_SHA256
