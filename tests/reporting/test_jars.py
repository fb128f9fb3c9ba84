"""The JDBC driver jars are found by the names Debian's packages really install (issue 28: the
SQLite package installs ``xerial-sqlite-jdbc-3.40.1.0.jar`` and the links
``sqlite-jdbc.jar`` / ``xerial-sqlite-jdbc.jar``; ``sqlite-jdbc-[0-9]*.jar`` found none)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from store.errors import ReportError
from store.reporting.session import JDBC_DRIVERS, find_jdbc_jars, jdbc_driver_for

#: What ``dpkg -L`` lists under /usr/share/java for each driver's package on Debian 12.
DEBIAN_12: dict[str, tuple[str, ...]] = {
    "libpostgresql-jdbc-java": (
        "postgresql.jar", "postgresql-42.5.5.jar", "postgresql-jdbc3.jar", "postgresql-jdbc4.jar",
    ),
    "libmariadb-java": ("mariadb-java-client.jar", "mariadb-java-client-2.7.6.jar"),
    "libxerial-sqlite-jdbc-java": (
        "xerial-sqlite-jdbc.jar", "sqlite-jdbc.jar", "xerial-sqlite-jdbc-3.40.1.0.jar",
    ),
    # derby.jar is the file and derby-10.14.2.0.jar the link; the locale and network-server
    # jars beside them are not the embedded driver.
    "libderby-java": (
        "derby.jar", "derby-10.14.2.0.jar", "derbyLocale_de_DE-10.14.2.0.jar",
        "derbyLocale_de_DE.jar", "derbynet.jar", "derbynet-10.14.2.0.jar",
    ),
    "libh2-java": ("h2.jar", "h2-2.1.214.jar"),
}  # fmt: skip
VERSIONED = {
    "libpostgresql-jdbc-java": "postgresql-42.5.5.jar",
    "libmariadb-java": "mariadb-java-client-2.7.6.jar",
    "libxerial-sqlite-jdbc-java": "xerial-sqlite-jdbc-3.40.1.0.jar",
    "libderby-java": "derby-10.14.2.0.jar",
    "libh2-java": "h2-2.1.214.jar",
}
URLS = {
    "libpostgresql-jdbc-java": "jdbc:postgresql://h/db",
    "libmariadb-java": "jdbc:mariadb://h/db",
    "libxerial-sqlite-jdbc-java": "jdbc:sqlite:/tmp/x.db",
    "libderby-java": "jdbc:derby:/tmp/derby;create=true",
    "libh2-java": "jdbc:h2:/tmp/h2db",
}


def _installed_jars(package: str) -> list[str]:
    """The jar names ``package`` installs in /usr/share/java, by ``dpkg -L``."""
    done = subprocess.run(
        ["dpkg", "-L", package], capture_output=True, text=True, check=False, timeout=30
    )
    assert done.returncode == 0, f"{package} is not installed (scripts/test installs it)"
    return [
        Path(line).name
        for line in done.stdout.splitlines()
        if line.startswith("/usr/share/java/") and line.endswith(".jar")
    ]


@pytest.mark.parametrize("package", sorted(DEBIAN_12))
def test_each_driver_is_found_among_the_jars_its_debian_package_installs(
    package: str, tmp_path: Path
) -> None:
    for name in DEBIAN_12[package]:
        (tmp_path / name).write_bytes(b"")
    driver, jar = jdbc_driver_for(URLS[package], str(tmp_path))
    assert driver.package == package
    assert Path(jar).name == VERSIONED[package]


@pytest.mark.parametrize("package", sorted(DEBIAN_12))
def test_the_unversioned_link_is_enough(package: str, tmp_path: Path) -> None:
    link = DEBIAN_12[package][0]
    (tmp_path / link).write_bytes(b"")
    _driver, jar = jdbc_driver_for(URLS[package], str(tmp_path))
    assert Path(jar).name == link


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="not a Debian system")
@pytest.mark.parametrize("package", sorted({d.package for d in JDBC_DRIVERS}))
def test_this_machine_s_packages_install_what_the_report_looks_for(
    package: str, tmp_path: Path
) -> None:
    """The names come from the package on this machine, not from the list above: a Debian
    that renames a jar fails here, not in a user's report."""
    names = _installed_jars(package)
    for name in names:
        (tmp_path / name).write_bytes(b"")
    classes = {d.class_name for d in JDBC_DRIVERS if d.package == package}
    found = find_jdbc_jars(str(tmp_path))
    assert classes <= set(found), (package, names)
    assert all(Path(found[c]).name in names for c in classes)


def test_a_missing_jar_names_the_package_and_the_names_looked_for(tmp_path: Path) -> None:
    (tmp_path / "sqlite-jdbc-debian.jar").write_bytes(b"")  # the maven-repo name: not ours
    with pytest.raises(ReportError) as missing:
        jdbc_driver_for("jdbc:sqlite:/tmp/x.db", str(tmp_path))
    assert "libxerial-sqlite-jdbc-java" in str(missing.value)
    assert "xerial-sqlite-jdbc-[0-9]*.jar" in str(missing.value)


def test_a_derby_network_server_is_refused_by_name(tmp_path: Path) -> None:
    """The embedded driver cannot serve jdbc:derby://, and the client driver's package
    (libderbyclient-java) is not one a report uses: one line saying so, not Spark's "no
    suitable driver"."""
    for name in DEBIAN_12["libderby-java"]:
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(ReportError, match="not a Derby network server"):
        jdbc_driver_for("jdbc:derby://db:1527/store", str(tmp_path))
