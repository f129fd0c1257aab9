# ruff: noqa: E501 - log lines are kept verbatim, one per line, as journald prints them.
"""Believable journald output for every service, generated from the clock so it never runs out.

A line's text depends only on its timestamp, so two calls a second apart agree on the lines they
share. ``service:postgres`` interleaves its WAL-archiving failure from the moment it began.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class JournalProfile:
    hostname: str
    process: str
    pid: int
    every_seconds: int
    routine: tuple[str, ...]


PROFILES: dict[str, JournalProfile] = {
    "service:adguard": JournalProfile(
        "adguard",
        "AdGuardHome",
        231,
        240,
        (
            "[info] dnsproxy: upstream https://dns.quad9.net/dns-query: 23.41ms",
            "[info] filtering: updated filter 1: 163402 bytes, 6211 rules",
            "[info] querylog: cleaned up 1184 old entries",
        ),
    ),
    "service:caddy": JournalProfile(
        "caddy",
        "caddy",
        388,
        90,
        (
            '{"level":"info","logger":"http.log.access","msg":"handled request","request":{"host":"jellyfin.hubris.network","method":"GET","uri":"/Users/Me"},"status":200,"duration":0.0041}',
            '{"level":"info","logger":"http.log.access","msg":"handled request","request":{"host":"git.hubris.network","method":"POST","uri":"/api/actions/runner.v1.RunnerService/FetchTask"},"status":200,"duration":0.0123}',
            '{"level":"info","logger":"tls","msg":"certificate is fresh","identifiers":["*.hubris.network"],"remaining":"1814400s"}',
            '{"level":"info","logger":"http.log.access","msg":"handled request","request":{"host":"auth.hubris.network","method":"GET","uri":"/outpost.goauthentik.io/auth/caddy"},"status":200,"duration":0.0188}',
        ),
    ),
    "service:authentik": JournalProfile(
        "authentik",
        "docker",
        1022,
        120,
        (
            'authentik-server-1  | {"event": "/api/v3/outposts/instances/", "level": "info", "method": "GET", "status": 200, "runtime": 38}',
            'authentik-worker-1  | {"event": "Task finished", "level": "info", "task_name": "outpost_controller", "state": "SUCCESS"}',
            'authentik-server-1  | {"event": "/application/o/token/", "level": "info", "method": "POST", "status": 200, "runtime": 61}',
        ),
    ),
    "service:vaultwarden": JournalProfile(
        "vaultwarden",
        "vaultwarden",
        412,
        300,
        (
            "[rocket::launch][INFO] Rocket has launched from http://0.0.0.0:8000",
            "[vaultwarden::api::identity][INFO] User alice@hubris.network logged in successfully. IP: 10.20.0.101",
            "[vaultwarden::api::notifications][INFO] Closing WebSocket connection",
        ),
    ),
    "service:oikos": JournalProfile(
        "oikos",
        "oikos",
        640,
        60,
        (
            'level=INFO msg="probe cycle finished" endpoints=58 failed=1 duration=2.41s',
            'level=INFO msg="actuator idle" queued=0 running=0',
            'level=WARN msg="signal deduplicated" slug=service:postgres kind=disk_usage_high count=+1',
        ),
    ),
    "service:hermes": JournalProfile(
        "oikos",
        "hermes",
        702,
        300,
        (
            "INFO daphne.server: HTTP/2 support not enabled (install the http2 and tls Twisted extras)",
            "INFO agent.mcp: oikos: 28 tools listed",
            "INFO agent.turns: turn finished stop_reason=end_turn iterations=3",
        ),
    ),
    "service:home-assistant": JournalProfile(
        "homeassistant",
        "homeassistant",
        188,
        180,
        (
            "INFO (MainThread) [homeassistant.components.recorder.core] Purging states and events before target 2026-10-29",
            "WARNING (Recorder) [homeassistant.components.recorder.util] The system could not validate that the sqlalchemy engine is PostgreSQL 16.4",
            "INFO (MainThread) [homeassistant.components.automation.hallway_lights] Hallway lights: Running automation actions",
        ),
    ),
    "service:postgres": JournalProfile(
        "postgres",
        "postgres",
        412,
        120,
        (
            "LOG:  checkpoint starting: time",
            "LOG:  checkpoint complete: wrote 2817 buffers (2.1%); 0 WAL file(s) added, 0 removed, 3 recycled; write=269.9 s",
            'LOG:  automatic vacuum of table "homeassistant.public.states": index scans: 1',
            "LOG:  connection authorized: user=authentik database=authentik application_name=authentik",
        ),
    ),
    "service:redis": JournalProfile(
        "redis",
        "redis-server",
        201,
        300,
        (
            "* 100 changes in 300 seconds. Saving...",
            "* Background saving started by pid 8812",
            "* DB saved on disk",
            "* Background saving terminated with success",
        ),
    ),
    "service:gitea": JournalProfile(
        "gitea",
        "gitea",
        533,
        150,
        (
            "router: completed GET /alice/infra/commits/branch/main for 10.20.0.101:0, 200 OK in 18.2ms",
            "router: completed POST /api/internal/hook/post-receive/alice/infra for 127.0.0.1:0, 200 OK in 42.0ms",
            "cron: Finished running cron task: update_mirrors",
        ),
    ),
    "service:woodpecker": JournalProfile(
        "woodpecker",
        "woodpecker-server",
        611,
        300,
        (
            '{"level":"info","repo":"alice/infra","pipeline":412,"message":"pipeline finished","status":"success"}',
            '{"level":"info","message":"agent connected","agent":"woodpecker-agent-1","platform":"linux/amd64"}',
        ),
    ),
    "service:prometheus": JournalProfile(
        "monitoring",
        "prometheus",
        344,
        180,
        (
            'level=info component=tsdb msg="Head GC completed" duration=41.92ms',
            'level=info component=tsdb msg="Compaction completed" duration=1.93s',
            'level=warn component="rule manager" msg="alert firing" alertname=PostgresDiskAlmostFull instance=postgres.hubris.network',
        ),
    ),
    "service:grafana": JournalProfile(
        "monitoring",
        "grafana",
        377,
        240,
        (
            'logger=context userId=1 orgId=1 uname=alice level=info msg="Request Completed" method=GET path=/api/dashboards/uid/pve status=200',
            'logger=cleanup level=info msg="Completed cleanup jobs" duration=9.31ms',
        ),
    ),
    "service:jellyfin": JournalProfile(
        "jellyfin",
        "jellyfin",
        455,
        150,
        (
            "[INF] [52] Emby.Server.Implementations.ScheduledTasks.TaskManager: Scan Media Library Completed after 0 minute(s) and 41 seconds",
            "[INF] [17] Jellyfin.Api.Helpers.MediaInfoHelper: User policy for bob. EnablePlaybackRemuxing: True EnableVideoPlaybackTranscoding: True",
            "[INF] [17] MediaBrowser.MediaEncoding.Transcoding.TranscodeManager: /usr/lib/jellyfin-ffmpeg/ffmpeg -init_hw_device vaapi=va:/dev/dri/renderD128 -init_hw_device qsv=qs@va ...",
            "[INF] [41] Emby.Server.Implementations.Session.SessionManager: Playback stopped reported by app Jellyfin Android 2.6.2 playing The Expanse S02E04",
        ),
    ),
    "service:sonarr": JournalProfile(
        "arr",
        "Sonarr",
        702,
        300,
        (
            "[Info] RssSyncService: RSS Sync Completed. Reports found: 100, Reports grabbed: 0",
            "[Info] DiskScanService: Completed scanning disk for The Expanse",
        ),
    ),
    "service:radarr": JournalProfile(
        "arr",
        "Radarr",
        733,
        300,
        (
            "[Info] RssSyncService: RSS Sync Completed. Reports found: 97, Reports grabbed: 1",
            "[Info] DownloadDecisionMaker: Processing 97 releases",
        ),
    ),
    "service:jellyseerr": JournalProfile(
        "jellyseerr",
        "node",
        288,
        600,
        (
            "[info][Jobs]: Starting scheduled job: Jellyfin Recently Added Scan",
            "[info][Jellyfin Sync]: Recently Added Scan Complete",
        ),
    ),
    "service:nfs-media": JournalProfile(
        "truenas",
        "kernel",
        0,
        900,
        (
            "nfsd: client 10.20.0.110 renewed lease",
            "nfsd: client 10.20.0.111 renewed lease",
        ),
    ),
    "service:pbs": JournalProfile(
        "pbs",
        "proxmox-backup-proxy",
        811,
        240,
        (
            "TASK ERROR: backup failed: No space left on device (os error 28) [datastore hubris]",
            "GET /api2/json/admin/datastore/hubris/status: 200 OK",
            "datastore hubris: usage 97.1% (1.94 TiB of 2.00 TiB)",
        ),
    ),
}

POSTGRES_INCIDENT = (
    "LOG:  archive command failed with exit code 255\nDETAIL:  The failed archive command was: "
    "proxmox-backup-client backup wal.pxar:/var/lib/postgresql/16/main/pg_wal/0000000100000A2B{segment} "
    "--repository oikos@pbs@pbs.hubris.network:hubris",
    'WARNING:  archiving write-ahead log file "0000000100000A2B{segment}" failed too many times, will try again later',
)


def _journal_text(
    slug: str,
    profile: JournalProfile,
    moment: datetime,
    index: int,
    incident_since: datetime | None,
    routine: tuple[str, ...],
) -> str:
    if slug == "service:postgres" and incident_since is not None and moment >= incident_since and index % 2 == 0:
        template = POSTGRES_INCIDENT[(index // 2) % len(POSTGRES_INCIDENT)]
        return template.format(segment=f"{index % 0xFF:08X}")
    return routine[index % len(routine)]


def journal_format(profile: JournalProfile, moment: datetime, text: str) -> str:
    stamp = moment.astimezone(UTC).strftime("%b %d %H:%M:%S")
    pid = f"[{profile.pid}]" if profile.pid else ""
    return f"{stamp} {profile.hostname} {profile.process}{pid}: {text}"


def journal_generate(
    slug: str,
    *,
    until: datetime,
    count: int,
    incident_since: datetime | None = None,
    routine: tuple[str, ...] | None = None,
) -> list[tuple[datetime, str]]:
    """The last ``count`` generated lines of ``slug`` up to ``until``, oldest first, as (time, line).

    ``incident_since`` is when postgres's archive failures began; its lines appear only after it.
    A message of several lines (a postgres DETAIL) becomes several journal lines, as journald prints it.
    ``routine`` replaces the profile's routine lines (a scenario's, oikos_sim/scenarios.py).
    """
    profile = PROFILES[slug]
    step = profile.every_seconds
    last_index = int(until.timestamp()) // step
    lines: list[tuple[datetime, str]] = []
    for index in range(last_index - count + 1, last_index + 1):
        moment = datetime.fromtimestamp(index * step, tz=UTC)
        text = _journal_text(slug, profile, moment, index, incident_since, routine or profile.routine)
        lines.extend((moment, journal_format(profile, moment, part)) for part in text.split("\n"))
    return lines[-count:]
