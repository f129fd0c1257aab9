"""Runbooks and notes the homelab's operators wrote down, searchable with ``search_knowledge``."""

from __future__ import annotations

from datetime import datetime

from oikos_sim.clock import ago
from oikos_sim.records import KnowledgeDoc

# (id, title, kind, tags, entities, days since last edit, body)
_DOCS: tuple[tuple[str, str, str, tuple[str, ...], tuple[str, ...], float, str], ...] = (
    (
        "kb-001",
        "PostgreSQL: pg_wal keeps growing (WAL archiving failures)",
        "runbook",
        ("postgres", "wal", "disk", "archive", "pbs"),
        ("service:postgres", "lxc:postgres", "service:pbs"),
        12,
        """When archive_command fails, PostgreSQL keeps every WAL segment until it can archive it, so
pg_wal grows until the data disk fills and the cluster stops accepting writes.

1. Confirm: `journalctl -u postgresql@16-main -n 100 | grep archive` shows
   `archive command failed with exit code 255`; `SELECT * FROM pg_stat_archiver;` shows failed_count rising.
2. Find the cause. Our archive_command pushes to pbs (`proxmox-backup-client` into datastore hubris):
   a full datastore (ENOSPC) or an expired API token are the usual reasons.
3. Fix the target first (see "Proxmox Backup Server: datastore full"). Archiving resumes by itself and
   pg_wal drains within minutes; never delete files in pg_wal by hand.
4. If the disk is above 95% and the target cannot be fixed quickly, grow the LXC disk
   (`pct resize 103 rootfs +16G`) — an operator-approved config change.""",
    ),
    (
        "kb-002",
        "Proxmox Backup Server: datastore full, prune and garbage collection",
        "runbook",
        ("pbs", "backup", "prune", "gc", "disk", "datastore"),
        ("service:pbs", "vm:pbs", "service:postgres"),
        30,
        """Datastore hubris lives on tank/pbs (TrueNAS dataset, 2 TiB quota).

- Check usage: `proxmox-backup-manager datastore list` and the dashboard; alert fires at 90%.
- Prune jobs keep: last 3, daily 7, weekly 4, monthly 6. A manual prune: `proxmox-backup-client prune`.
- Space is only returned after garbage collection: `proxmox-backup-manager garbage-collection start hubris`
  (takes ~40 min on tank; chunks younger than 24h 5m are kept).
- Raising the quota on TrueNAS (`zfs set quota=2.5T tank/pbs`) is the fastest relief when tank has room.""",
    ),
    (
        "kb-003",
        "Jellyfin hardware acceleration (Intel Quick Sync) in an unprivileged LXC",
        "runbook",
        ("jellyfin", "qsv", "transcoding", "gpu", "lxc", "hardware acceleration"),
        ("service:jellyfin", "lxc:jellyfin", "host:pve3"),
        64,
        """LXC 110 gets the iGPU through `dev0: /dev/dri/renderD128,gid=993` in /etc/pve/lxc/110.conf.

- Inside the container the jellyfin user must be in group render (gid 993 maps via the idmap).
- Dashboard > Playback > Transcoding: Intel QuickSync (QSV), device /dev/dri/renderD128, enable
  hardware decoding for H264/HEVC/VP9/AV1, low-power encoding on (E-2236 has UHD P630).
- After a pve3 kernel update, check `vainfo` in the container; if renderD128 is missing, reboot the
  container (`pct reboot 110`) — transcodes silently fall back to software otherwise.
- Symptom of the fallback: ffmpeg at 400% CPU and `[WRN] ... falling back to software decoding`
  in the log.""",
    ),
    (
        "kb-004",
        "Caddy: adding a vhost behind authentik forward auth",
        "doc",
        ("caddy", "authentik", "forward_auth", "vhost", "tls"),
        ("service:caddy", "service:authentik"),
        21,
        """The Caddyfile lives in git (infra/caddy/Caddyfile) and is deployed by Oikos; edits made on the
LXC show up as drift.

```
sonarr.hubris.network {
    import authentik_forward_auth
    reverse_proxy arr.hubris.network:8989
}
```

Validate with `caddy validate --config /etc/caddy/Caddyfile`, then `systemctl reload caddy` (a reload is
zero-downtime; a restart drops open connections, including Jellyfin streams).""",
    ),
    (
        "kb-005",
        "authentik: recovering admin access and outpost health",
        "runbook",
        ("authentik", "sso", "recovery", "outpost", "oidc"),
        ("service:authentik", "lxc:authentik"),
        90,
        """- Recovery link: `docker compose exec server ak create_recovery_key 10 akadmin` (valid 10 minutes).
- The embedded outpost serves forward auth for caddy; if logins loop, check that the outpost is
  healthy under System > Outposts and that redis is reachable.
- authentik needs postgres: when the database is read-only or full, logins fail with
  `django.db.utils.OperationalError` and every SSO-protected service looks down.""",
    ),
    (
        "kb-006",
        "Proxmox: growing an LXC root disk",
        "runbook",
        ("proxmox", "lxc", "disk", "resize", "pct"),
        ("host:pve1", "host:pve2", "host:pve3"),
        45,
        """`pct resize <vmid> rootfs +<size>` grows the volume and the filesystem online; shrinking is not
supported (restore from backup instead). Check the storage has room first (`pvesm status`).
Record the change in Oikos: it is a config_mutation and needs operator approval.""",
    ),
    (
        "kb-007",
        "Gitea upgrade procedure",
        "runbook",
        ("gitea", "upgrade", "deploy", "backup"),
        ("service:gitea", "lxc:gitea", "service:postgres"),
        18,
        """1. Read the release notes for breaking changes (1.22 needs Go templates updated for custom themes).
2. Snapshot: `pct snapshot 105 pre-upgrade-<version>`; dump: `gitea dump -c /etc/gitea/app.ini`.
3. Deploy through Oikos (`deploy` with params.version); the procedure swaps the binary and runs
   `gitea doctor check --all`.
4. Rollback = `rollback` to the snapshot (destructive: loses pushes made after the snapshot).""",
    ),
    (
        "kb-008",
        "Vaultwarden: restore from backup",
        "runbook",
        ("vaultwarden", "restore", "backup", "postgres"),
        ("service:vaultwarden", "service:postgres", "service:pbs"),
        120,
        """Vaultwarden's data is the postgres database vaultwarden plus /var/lib/vaultwarden/attachments.
Restore the attachments from pbs (file restore of CT 106), then
`pg_restore -d vaultwarden vaultwarden-<date>.dump`. Clients keep an offline vault copy, so a restore
is not urgent for reading passwords.""",
    ),
    (
        "kb-009",
        "TrueNAS NFS export for the media stack",
        "doc",
        ("truenas", "nfs", "media", "permissions", "idmap"),
        ("service:nfs-media", "vm:truenas", "service:jellyfin", "service:sonarr", "service:radarr"),
        75,
        """tank/media is exported over NFSv4 to 10.20.0.110-112 with mapall user media (uid 1000).
Unprivileged LXCs see it through a bind mount from the host (`mp0: /mnt/pve/media,mp=/mnt/media`),
so files appear owned by uid 101000 on the host. If sonarr cannot import, check the export's
maproot and that the pve3 mount is up (`findmnt /mnt/pve/media`).""",
    ),
    (
        "kb-010",
        "Home Assistant recorder on PostgreSQL",
        "doc",
        ("home assistant", "recorder", "postgres", "purge"),
        ("service:home-assistant", "service:postgres"),
        200,
        """recorder: db_url postgresql://homeassistant@postgres.hubris.network/homeassistant,
purge_keep_days 30.
The states table is the biggest user of the shared cluster (~9 GiB). If postgres is short on disk,
`recorder.purge` with repack: true frees space, at the cost of history.""",
    ),
    (
        "kb-011",
        "Sonarr/Radarr indexer timeouts",
        "runbook",
        ("sonarr", "radarr", "indexer", "timeout", "prowlarr"),
        ("service:sonarr", "service:radarr"),
        33,
        """Indexer searches time out when the upstream indexer throttles us. The apps back off for 6 hours
after repeated failures. A restart of sonarr/radarr clears the back-off; if timeouts return within
the hour, disable the indexer instead of restarting again.""",
    ),
    (
        "kb-012",
        "Fleet conventions: slugs, VMIDs and names",
        "doc",
        ("conventions", "slugs", "vmid", "naming", "oikos"),
        (),
        300,
        """Slugs are `<type>:<name>`: host:pve1, lxc:caddy, vm:truenas, service:jellyfin. VMIDs: 100-129
platform, 110-119 media, 120-129 observability, 130+ control plane, 200+ VMs. Hostnames are
<name>.hubris.network on 10.20.0.0/24, mesh addresses in 100.74.12.0/24.""",
    ),
    (
        "kb-013",
        "Caddy certificates: ACME DNS-01 with Cloudflare",
        "doc",
        ("caddy", "tls", "certificates", "acme", "cloudflare"),
        ("service:caddy",),
        150,
        """Caddy is built with the cloudflare DNS module (xcaddy) and obtains certificates by DNS-01, so no
port 80 is exposed. The API token is CADDY_CLOUDFLARE_API_TOKEN (zone DNS edit only). Renewal starts
30 days before expiry; a failure shows as `obtaining certificate ... error` in the journal.""",
    ),
    (
        "kb-014",
        "Postmortem: authentik outage after postgres ran out of disk (March)",
        "postmortem",
        ("postmortem", "postgres", "authentik", "disk", "sso"),
        ("service:postgres", "service:authentik", "service:grafana", "service:sonarr"),
        240,
        """Timeline: pbs datastore filled, WAL archiving failed, postgres disk hit 100% after ~14 hours and
the cluster went read-only. authentik logins failed, which took down every forward-auth vhost.
Lessons: alert on pg_wal size, not only disk %; keep 20% headroom on the postgres disk; the blast
radius of postgres is most of the homelab.""",
    ),
)


def knowledge_docs(anchor: datetime) -> list[KnowledgeDoc]:
    return [
        KnowledgeDoc(
            id=doc_id,
            title=title,
            kind=kind,  # type: ignore[arg-type]
            tags=tags,
            entities=entities,
            updated_at=ago(anchor, days=days),
            body=body,
        )
        for doc_id, title, kind, tags, entities, days, body in _DOCS
    ]
