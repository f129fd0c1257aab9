"""What Oikos remembers about the past day and beyond: signals, audit log, timeline, patterns,
skills, the agent-activity ledger and the secret names each actor may use."""

from __future__ import annotations

from datetime import datetime

from oikos_sim.clock import ago
from oikos_sim.records import (
    ActivityEntry,
    AuditEntry,
    Pattern,
    SecretRef,
    Signal,
    Skill,
    TimelineEvent,
)
from oikos_sim.seed.fleet import archive_failure_started


def seed_signals(anchor: datetime) -> list[Signal]:
    failing = archive_failure_started(anchor)
    return [
        Signal(
            "sig-0001",
            "service:pbs",
            "datastore_usage_high",
            "warning",
            "firing",
            "datastore hubris at 97.1% (1.94 of 2.00 TiB); last backup task failed with ENOSPC",
            ago(failing, minutes=41),
            ago(anchor, minutes=3),
            118,
        ),
        Signal(
            "sig-0002",
            "service:postgres",
            "wal_archive_failing",
            "critical",
            "firing",
            "archive_command failing (exit 255) — pg_stat_archiver.failed_count 1,117",
            failing,
            ago(anchor, minutes=1),
            558,
        ),
        Signal(
            "sig-0003",
            "service:postgres",
            "disk_usage_high",
            "warning",
            "firing",
            "/var/lib/postgresql at 91.1% (threshold 85%), +3.0 pp/hour",
            ago(anchor, hours=3, minutes=5),
            ago(anchor, minutes=1),
            37,
        ),
        Signal(
            "sig-0004",
            "service:sonarr",
            "http_timeout",
            "warning",
            "resolved",
            "indexer search timed out 5 times in 10 minutes",
            ago(anchor, hours=20),
            ago(anchor, hours=19, minutes=12),
            5,
        ),
        Signal(
            "sig-0005",
            "service:caddy",
            "cert_expiry",
            "info",
            "resolved",
            "certificate *.hubris.network renewed, 89 days left",
            ago(anchor, days=2, hours=4),
            ago(anchor, days=2, hours=4),
            1,
        ),
        Signal(
            "sig-0006",
            "lxc:caddy",
            "config_drift",
            "info",
            "firing",
            "/etc/caddy/Caddyfile differs from git (1 hunk: jellyseerr vhost)",
            ago(anchor, days=1, hours=2),
            ago(anchor, minutes=5),
            288,
        ),
        Signal(
            "sig-0007",
            "host:pve3",
            "cpu_temperature",
            "warning",
            "resolved",
            "package temperature 88 °C for 6 minutes during a 4K transcode",
            ago(anchor, hours=16),
            ago(anchor, hours=15, minutes=54),
            6,
        ),
    ]


def seed_patterns(anchor: datetime) -> list[Pattern]:
    return [
        Pattern(
            "pat-001",
            "Full backup datastore starves postgres of disk",
            "When the pbs datastore passes 95%, postgres WAL archiving fails within the hour and pg_wal "
            "grows ~2 GiB/hour until /var/lib/postgresql fills (seen in March: 14 h to read-only).",
            ("service:pbs", "service:postgres"),
            0.92,
            3,
            ago(anchor, minutes=1),
            "Free space on pbs (prune, then garbage collection) before touching postgres; archiving then "
            "resumes by itself.",
        ),
        Pattern(
            "pat-002",
            "Indexer timeouts clear after an arr restart",
            "Sonarr/Radarr indexer timeouts recovered after a restart in 7 of 8 episodes; the 8th needed the "
            "indexer disabled.",
            ("service:sonarr", "service:radarr"),
            0.81,
            8,
            ago(anchor, hours=19),
            "restart the affected service (reversible_low).",
        ),
        Pattern(
            "pat-003",
            "Friday-evening transcode peaks on pve3",
            "Jellyfin runs 3-5 concurrent transcodes on Fridays 20:00-23:00; pve3 CPU temperature reaches "
            "85-90 °C when one falls back to software decoding.",
            ("service:jellyfin", "host:pve3"),
            0.74,
            11,
            ago(anchor, hours=16),
            "Check that renderD128 is present in lxc:jellyfin after kernel updates.",
        ),
        Pattern(
            "pat-004",
            "Caddyfile edited by hand during incidents",
            "Config drift on lxc:caddy appears within 2 hours of an incident in 5 of 6 cases.",
            ("lxc:caddy", "service:caddy"),
            0.66,
            6,
            ago(anchor, days=1, hours=2),
            "Re-deploy the Caddyfile from git once the incident is closed.",
        ),
    ]


def seed_skills() -> list[Skill]:
    return [
        Skill(
            "systemd-restart",
            "Restart a systemd unit and wait for it to report active (running).",
            ("restart",),
            ("service",),
            "reversible_low",
            ("systemctl restart <unit>", "wait for ActiveState=active (30 s)", "probe the endpoint"),
            46,
            0.98,
        ),
        Skill(
            "systemd-reload",
            "Reload a unit's configuration without dropping connections.",
            ("reload",),
            ("service",),
            "reversible_low",
            ("<service> validate config", "systemctl reload <unit>", "probe the endpoint"),
            19,
            1.0,
        ),
        Skill(
            "pct-reboot",
            "Reboot an LXC container (pct reboot) or a VM (qm reboot).",
            ("restart",),
            ("lxc", "vm"),
            "reversible_low",
            ("pct reboot <vmid> --timeout 60", "wait for status running", "probe its services"),
            12,
            1.0,
        ),
        Skill(
            "probe",
            "Run the endpoint probe now (HTTP, TCP or DNS).",
            ("ping",),
            ("service", "lxc", "vm", "host"),
            "reversible_low",
            ("probe endpoint",),
            311,
            1.0,
        ),
        Skill(
            "deploy-release",
            "Deploy a version: snapshot, install, migrate, health check.",
            ("deploy",),
            ("service", "lxc", "vm"),
            "config_mutation",
            ("pct snapshot <vmid> pre-deploy", "install release", "run migrations", "health check"),
            9,
            0.89,
        ),
        Skill(
            "config-apply",
            "Apply a configuration change from git and reload.",
            ("config",),
            ("service", "lxc", "vm", "host"),
            "config_mutation",
            ("render config from git", "validate", "apply", "reload or restart"),
            14,
            0.93,
        ),
        Skill(
            "snapshot-rollback",
            "Roll a guest back to its last pre-deploy snapshot.",
            ("rollback",),
            ("service", "lxc", "vm"),
            "destructive",
            ("pct rollback <vmid> <snapshot>", "start", "health check"),
            2,
            1.0,
        ),
        Skill(
            "guest-destroy",
            "Stop and destroy a guest and its volumes.",
            ("destroy", "wipe"),
            ("lxc", "vm", "service"),
            "destructive",
            ("backup to pbs", "pct stop <vmid>", "pct destroy <vmid> --purge"),
            0,
            1.0,
        ),
        Skill(
            "node-reboot",
            "Reboot a Proxmox node after migrating or stopping its guests.",
            ("restart",),
            ("host",),
            "destructive",
            ("ha-manager migrate / shutdown guests", "reboot", "wait for quorum"),
            1,
            1.0,
        ),
    ]


def seed_audit(anchor: datetime) -> list[AuditEntry]:
    return [
        AuditEntry(
            "aud-0001",
            ago(anchor, days=6, hours=3),
            "operator:alice",
            "deploy",
            "service:gitea",
            "1.22.2 -> 1.22.3 (approved by alice)",
            "completed",
        ),
        AuditEntry(
            "aud-0002",
            ago(anchor, days=4, hours=22),
            "agent:hermes",
            "restart",
            "service:radarr",
            "indexer timeouts (auto-act)",
            "completed",
        ),
        AuditEntry(
            "aud-0003",
            ago(anchor, days=3, hours=1),
            "operator:bob",
            "config",
            "service:caddy",
            "add jellyseerr vhost (approved by bob)",
            "completed",
        ),
        AuditEntry(
            "aud-0004",
            ago(anchor, days=2, hours=4),
            "service:oikos-actuator",
            "renew",
            "service:caddy",
            "certificate *.hubris.network renewed",
            "completed",
        ),
        AuditEntry(
            "aud-0005",
            ago(anchor, days=1, hours=9),
            "operator:alice",
            "deploy",
            "service:jellyfin",
            "10.9.10 -> 10.9.11 (approved by alice)",
            "completed",
        ),
        AuditEntry(
            "aud-0006",
            ago(anchor, hours=19, minutes=30),
            "agent:hermes",
            "restart",
            "service:sonarr",
            "indexer timeouts (auto-act)",
            "completed",
        ),
        AuditEntry(
            "aud-0007",
            ago(anchor, hours=14),
            "operator:bob",
            "deploy",
            "service:pbs",
            "prune job schedule changed to daily 02:30 (approved by alice)",
            "completed",
        ),
        AuditEntry(
            "aud-0008",
            ago(anchor, hours=11, minutes=2),
            "service:oikos-actuator",
            "backup",
            "lxc:postgres",
            "vzdump CT 103 to pbs:hubris",
            "failed: No space left on device (os error 28)",
        ),
    ]


def seed_timeline(anchor: datetime) -> list[TimelineEvent]:
    failing = archive_failure_started(anchor)
    return [
        TimelineEvent(
            ago(anchor, days=1, hours=9),
            "execution.completed",
            "service:jellyfin",
            "deploy 10.9.11 completed (approved by alice)",
        ),
        TimelineEvent(
            ago(anchor, hours=19, minutes=30),
            "execution.completed",
            "service:sonarr",
            "restart completed (auto-act, agent:hermes)",
        ),
        TimelineEvent(ago(anchor, hours=16), "signal.fired", "host:pve3", "cpu_temperature 88 °C"),
        TimelineEvent(
            ago(anchor, hours=11, minutes=2),
            "execution.failed",
            "lxc:postgres",
            "nightly vzdump to pbs failed: No space left on device",
        ),
        TimelineEvent(ago(failing, minutes=41), "signal.fired", "service:pbs", "datastore hubris above 95%"),
        TimelineEvent(failing, "signal.fired", "service:postgres", "WAL archiving started failing"),
        TimelineEvent(ago(anchor, hours=3, minutes=5), "signal.fired", "service:postgres", "disk usage above 85%"),
        TimelineEvent(
            ago(anchor, hours=3, minutes=5),
            "entity.health_changed",
            "service:postgres",
            "healthy -> degraded",
        ),
    ]


def seed_activity(anchor: datetime) -> list[ActivityEntry]:
    def entry(n: int, minutes: float, tool: str, arguments: dict[str, object], ms: int) -> ActivityEntry:
        return ActivityEntry(f"act-{n:04d}", ago(anchor, minutes=minutes), "agent:hermes", tool, arguments, False, ms)

    return [
        entry(1, 1170, "get_health_summary", {}, 14),
        entry(2, 1169, "tail_log", {"service": "sonarr", "lines": 50}, 212),
        entry(3, 1168, "request_execution", {"target": "service:sonarr", "action": "restart"}, 1043),
        entry(4, 180, "get_health_summary", {}, 12),
        entry(5, 179, "get_blast_radius", {"slug": "service:postgres"}, 9),
    ]


def seed_secrets(anchor: datetime) -> dict[str, list[SecretRef]]:
    return {
        "agent:hermes": [
            SecretRef("OIKOS_MCP_BEARER_TOKEN", "/hermes/oikos", "MCP client", ago(anchor, days=21)),
            SecretRef("ANTHROPIC_API_KEY", "/hermes/llm", "Messages API", ago(anchor, days=40)),
            SecretRef("MATRIX_ACCESS_TOKEN", "/hermes/matrix", "notifier bridge", ago(anchor, days=90)),
        ],
        "service:hermes-controlroom": [
            SecretRef("OIKOS_OPERATOR_TOKEN", "/hermes/oikos", "approvals REST client", ago(anchor, days=21)),
            SecretRef("DJANGO_SECRET_KEY", "/hermes/web", "session signing", ago(anchor, days=120)),
        ],
    }
