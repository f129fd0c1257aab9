"""The compose stack and the image definition, checked with the tools an operator uses."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKER = REPO_ROOT / "docker"
ENV_EXAMPLE = DOCKER / "hermes.env.example"


def compose_command() -> list[str]:
    """`docker compose` (the plugin) when it works, else Debian's `docker-compose`; never a skip."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=30)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail(
        "Neither `docker compose` nor `docker-compose` is installed, so docker/compose.yaml cannot be validated. "
        "Install one: `apt-get install docker-compose` (Debian; .ci/run does this) or Docker's compose plugin."
    )


def compose_config(*args: str, env_file: Path = ENV_EXAMPLE) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "POSTGRES_", "COMPOSE_"))}
    env["HERMES_ENV_FILE"] = ENV_EXAMPLE.name  # what an operator's docker/.env would be
    return subprocess.run(
        [*compose_command(), "--env-file", str(env_file), "-f", str(DOCKER / "compose.yaml"), *args, "config"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def services(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert run.returncode == 0, run.stderr
    return yaml.safe_load(run.stdout)["services"]


def environment(service: dict[str, Any]) -> dict[str, str]:
    value = service.get("environment") or {}
    if isinstance(value, list):
        return dict(item.split("=", 1) for item in value)
    return {key: str(item) for key, item in value.items()}


def example_values() -> dict[str, str]:
    lines = ENV_EXAMPLE.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line.strip() and not line.lstrip().startswith("#"))


class TestCompose:
    def test_the_stack_validates_with_the_example_env_file(self) -> None:
        found = services(compose_config())

        assert {"hermes", "postgres", "redis"} <= set(found)
        hermes = environment(found["hermes"])
        assert (
            hermes["DATABASE_URL"].startswith("postgres://hermes:")
            and "@postgres:5432/hermes" in hermes["DATABASE_URL"]
        )
        assert hermes["REDIS_URL"] == "redis://redis:6379/0"
        # Every setting of the env file reaches Hermes.
        assert {key: hermes[key] for key in example_values()} == example_values()
        assert found["hermes"]["depends_on"]["postgres"]["condition"] == "service_healthy"

    def test_the_watcher_runs_from_the_same_image_on_the_same_database(self) -> None:
        found = services(compose_config())

        watch = found["watch"]
        assert watch["image"] == found["hermes"]["image"]
        assert watch["entrypoint"] == ["python", "manage.py", "watch"]
        assert environment(watch)["DATABASE_URL"] == environment(found["hermes"])["DATABASE_URL"]
        assert {key: environment(watch)[key] for key in example_values()} == example_values()
        # Migrations are Hermes's start script's job: the watcher waits for a healthy Hermes.
        assert watch["depends_on"]["hermes"]["condition"] == "service_healthy"

    def test_the_matrix_profile_adds_the_bridge_from_the_same_image_on_the_same_database(self) -> None:
        found = services(compose_config("--profile", "matrix"))
        bridge = found["matrix"]
        assert bridge["profiles"] == ["matrix"]  # opt-in
        assert bridge["image"] == found["hermes"]["image"]
        assert bridge["entrypoint"] == ["python", "manage.py", "matrix_bridge"]
        assert environment(bridge)["DATABASE_URL"] == environment(found["hermes"])["DATABASE_URL"]
        assert bridge["depends_on"]["hermes"]["condition"] == "service_healthy"

    def test_the_demo_profile_adds_oikos_sim_from_the_same_image(self) -> None:
        found = services(compose_config("--profile", "demo"))

        sim = found["oikos-sim"]
        assert sim["profiles"] == ["demo"]
        assert sim["image"] == found["hermes"]["image"]
        assert sim["entrypoint"][:3] == ["python", "-m", "oikos_sim"]

    def test_without_an_env_file_it_names_what_is_missing(self, tmp_path: Path) -> None:
        empty = tmp_path / "empty.env"
        empty.write_text("")
        run = compose_config(env_file=empty)
        assert run.returncode != 0
        assert "POSTGRES_PASSWORD" in run.stderr

    def test_the_example_holds_no_secrets(self) -> None:
        values = example_values()
        for name in ("HERMES_SECRET_KEY", "ANTHROPIC_API_KEY", "OIKOS_MCP_TOKEN", "OIKOS_API_TOKEN"):
            assert values[name] == "", name
        assert values["POSTGRES_PASSWORD"].startswith("change-me")

    def test_every_variable_the_stack_needs_is_in_the_example_or_has_a_default(self) -> None:
        text = (DOCKER / "compose.yaml").read_text()
        needed = set(re.findall(r"\$\{([A-Z_]+)\}", text)) | set(re.findall(r"\$\{([A-Z_]+):\?", text))
        assert needed <= set(example_values()), needed - set(example_values())


class TestImage:
    dockerfile = (DOCKER / "Dockerfile").read_text()

    def test_installs_exactly_the_lock_file_without_dev_tools(self) -> None:
        assert "uv sync --locked --no-dev" in self.dockerfile
        makefile_uv = re.search(r"UV_VERSION := (\S+)", (REPO_ROOT / "Makefile").read_text())
        assert makefile_uv and f"uv=={makefile_uv.group(1)}" in self.dockerfile

    def test_runs_unprivileged_through_the_start_script_with_a_healthcheck(self) -> None:
        runtime = self.dockerfile.split(" AS runtime", 1)[1]
        user = re.search(r"^USER (\S+)", runtime, re.MULTILINE)
        assert user and user.group(1).split(":")[0] not in ("root", "0")
        assert 'ENTRYPOINT ["/opt/hermes/docker/start.sh"]' in runtime
        assert "/healthz" in runtime.split("HEALTHCHECK", 1)[1]
        build = self.dockerfile.split(" AS runtime", 1)[0]
        # The manifest collectstatic writes at build is the one the runtime storage reads.
        assert "HERMES_STATIC_MANIFEST=true" in build.split("collectstatic", 1)[0].rsplit("RUN", 1)[1]
        assert "HERMES_STATIC_MANIFEST=true" in runtime
