"""A model by its Hugging Face Hub id: config.json through the user's HF cache, and the
safetensors headers (never the weights) through HTTP Range requests.

`huggingface_hub` is imported here only, when a Hub id is used, so catalogue lookups start
without it. It brings the user's cache (HF_HOME / HF_HUB_CACHE), token (HF_TOKEN or a saved
login), HF_HUB_OFFLINE, HF_ENDPOINT and its timeouts (HF_HUB_ETAG_TIMEOUT,
HF_HUB_DOWNLOAD_TIMEOUT, in seconds; config.json is read within their sum or not at all).
The headers it reads are kept in $HF_HOME/kvplan/safetensors/<org>--<name>/<commit>.json (or
under $KVPLAN_CACHE), so a second run, or a run offline, reads the same bytes without the
network.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kvplan.limits as limits
from kvplan.catalog.tensor_headers import TensorHeader, parse_header
from kvplan.errors import KvplanError
from kvplan.files import parse_json, read_text, write_atomically

HUB_PREFIX = "hf:"
CACHE_ENV = "KVPLAN_CACHE"
# Hub repo ids: org/name of letters, digits, '-', '_', '.'; an optional @revision.
_HUB_ID = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96})(@(?P<revision>[\w./-]+))?")


@dataclass(frozen=True)
class HubRef:
    """A Hub model id and the revision asked for (None: the main branch)."""

    repo_id: str
    revision: str | None = None

    def __str__(self) -> str:
        return self.repo_id + (f"@{self.revision}" if self.revision else "")


def parse_hub_id(text: str) -> HubRef | None:
    """`org/name` or `org/name@revision` (an `hf:` prefix allowed), else None."""
    match = _HUB_ID.fullmatch(text.removeprefix(HUB_PREFIX))
    if match is None or ".." in match["repo"]:
        return None
    return HubRef(match["repo"], match["revision"])


@dataclass(frozen=True)
class HubModel:
    """What was read of a Hub model: its config, the commit it came from, its tensors."""

    ref: HubRef
    config: dict[str, Any]
    commit: str
    tensors: tuple[TensorHeader, ...] | None  # None: no safetensors headers could be read
    warnings: tuple[str, ...]

    @property
    def source(self) -> str:
        """The config.json URL at the exact commit read."""
        return f"https://huggingface.co/{self.ref.repo_id}/blob/{self.commit}/config.json"


def _is_hub_failure(error: Exception) -> bool:
    """An error of the Hub client or its HTTP stack (the user's to fix), not a bug here."""
    package = type(error).__module__.split(".")[0]
    return isinstance(error, OSError) or package in ("huggingface_hub", "httpx", "httpx2")


def _hub_error(ref: HubRef, error: Exception, endpoint: str, offline: bool) -> KvplanError:
    """One line that says what went wrong and what to do, for each way the Hub can fail."""
    from huggingface_hub import errors

    page = f"{endpoint}/{ref.repo_id}"
    if isinstance(error, errors.GatedRepoError):
        return KvplanError(
            f"{ref}: gated model: accept its licence at {page} and set HF_TOKEN (or run "
            "`hf auth login`) with a token of the account that accepted it"
        )
    if isinstance(error, errors.RepositoryNotFoundError):
        return KvplanError(
            f"{ref}: no such model on the Hub (or it is private: set HF_TOKEN to a token that "
            "can read it); check the id"
        )
    if isinstance(error, errors.RevisionNotFoundError):
        return KvplanError(f"{ref}: no revision {ref.revision!r}; check the branch, tag or commit")
    if isinstance(error, errors.RemoteEntryNotFoundError):
        return KvplanError(f"{ref}: the repository has no config.json (not a transformers model)")
    if offline:
        return KvplanError(
            f"{ref}: not in the Hugging Face cache and HF_HUB_OFFLINE is set: run once online "
            "(or unset HF_HUB_OFFLINE)"
        )
    if "Timeout" in type(error).__name__ or isinstance(error, TimeoutError):
        return KvplanError(
            f"{ref}: the Hub at {endpoint} did not answer in time (HF_HUB_ETAG_TIMEOUT, "
            "HF_HUB_DOWNLOAD_TIMEOUT seconds) and the model is not cached: check the network "
            "(or HF_ENDPOINT), then run again"
        )
    if isinstance(error, errors.LocalEntryNotFoundError):
        return KvplanError(
            f"{ref}: cannot reach the Hub at {endpoint} and the model is not cached: check the "
            "network (or HF_ENDPOINT), then run again"
        )
    status = getattr(getattr(error, "response", None), "status_code", None)
    return KvplanError(f"{ref}: the Hub at {endpoint} answered {status or type(error).__name__}")


def _cache_file(ref: HubRef, commit: str) -> Path:
    from huggingface_hub import constants

    root = Path(os.environ.get(CACHE_ENV) or Path(constants.HF_HOME) / "kvplan")
    return root / "safetensors" / ref.repo_id.replace("/", "--") / f"{commit}.json"


def _cached_tensors(path: Path) -> tuple[TensorHeader, ...] | None:
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
        return tuple(TensorHeader(n, d, tuple(s), b) for n, d, s, b in rows)
    except (OSError, ValueError, TypeError):
        return None  # absent or damaged: read the headers again


def _store(path: Path, tensors: tuple[TensorHeader, ...]) -> None:
    """Write the headers beside the HF cache, atomically; a cache that cannot be written is
    skipped, not an error."""
    rows = [[t.name, t.dtype, list(t.shape), t.nbytes] for t in tensors]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(rows, separators=(",", ":")))
    except (OSError, KvplanError):
        pass


def _fetch_tensors(ref: HubRef, commit: str) -> tuple[tuple[TensorHeader, ...] | None, str | None]:
    """Every safetensors header of the checkpoint at `commit` (Range requests), or a warning."""
    from huggingface_hub import HfApi, constants, errors

    try:
        metadata = HfApi().get_safetensors_metadata(
            ref.repo_id, revision=commit, timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT
        )
    except errors.NotASafetensorsRepoError:
        return None, f"{ref} has no safetensors files: weights computed from the config"
    except Exception as error:
        if not _is_hub_failure(error):
            raise
        return None, (
            f"{ref}: safetensors headers not read ({type(error).__name__}): weights computed "
            "from the config; run again for the checkpoint's exact bytes"
        )
    tensors = []
    for filename, file in sorted(metadata.files_metadata.items()):
        header = {
            name: {"dtype": t.dtype, "shape": t.shape, "data_offsets": list(t.data_offsets)}
            for name, t in file.tensors.items()
        }
        tensors += parse_header(header, f"{ref} {filename}")
    return tuple(tensors), None


def _within(limit_s: float, call: Callable[[], str]) -> str:
    """`call()`, or TimeoutError after `limit_s` seconds.

    When config.json is not cached and its metadata request times out, huggingface_hub
    (2.x, file_download.py, _ETAG_RETRY_TIMEOUT = 60) asks again with a 60 s timeout and
    backoff retries: a slow Hub took nearly a minute to fail whatever HF_HUB_ETAG_TIMEOUT
    said. The call runs on a daemon thread so the stated timeouts bound the wait; a thread
    still waiting when the limit passes is left to end on its own (it only fills the cache).
    """
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as error:  # handed to the caller's thread below
            outcome.append((False, error))

    worker = threading.Thread(target=run, name="kvplan-hub", daemon=True)
    worker.start()
    worker.join(limit_s)
    if not outcome:
        raise TimeoutError(f"no answer within {limit_s:g} s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


# How long the reachability probe waits for a name lookup and a TCP connection, in seconds:
# a reachable Hub connects in well under that, and the client's own retries of an unreachable
# one (1 + 2 + 4 + 8 + 8 s of backoff) took 20 s or more to say so.
PROBE_TIMEOUT_S = 3.0
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY")


def unreachable(endpoint: str, limit_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why `endpoint` (a URL) cannot be reached at all, or None when a TCP connection to it
    opens within `limit_s` seconds (or a proxy stands between: then the client is asked).

    A name that does not resolve, a refused connection or a network that does not route is
    "no network": no retry of the client's would change it.
    """
    import socket
    from urllib.parse import urlsplit

    if any(os.environ.get(name) for name in PROXY_VARIABLES):
        return None
    parts = urlsplit(endpoint)
    if not parts.hostname:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)

    def connect() -> str:
        try:
            socket.create_connection((parts.hostname, port), timeout=limit_s).close()
        except socket.gaierror:
            return f"the name {parts.hostname} does not resolve"
        except OSError as error:
            return error.strerror or type(error).__name__
        return ""

    try:
        reason = _within(limit_s, connect)
    except TimeoutError:
        return f"no connection within {limit_s:g} s"
    return reason or None


def _cached_or_unreachable(ref: HubRef, download: Callable[..., str], reason: str) -> Path:
    """The cached config.json of `ref`, or the one line that says the Hub is out of reach."""
    from huggingface_hub import constants

    try:
        return Path(download(local=True))
    except Exception as error:
        if not _is_hub_failure(error):
            raise
    raise KvplanError(
        f"{ref}: cannot reach the Hub at {constants.ENDPOINT} ({reason}) and the model is not "
        "cached: check the network (or HF_ENDPOINT), then run again"
    )


def fetch_hub_model(ref: HubRef) -> HubModel:
    """config.json of `ref` (downloaded once into the HF cache) and its safetensors headers.

    Raises:
        KvplanError: one line per failure (gated, private or missing, no such revision,
            offline and not cached, the Hub unreachable), saying what to do.
    """
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.utils import disable_progress_bars, logging

    # The client's own retry warnings and progress bars would break the one-line contract.
    logging.set_verbosity_error()
    disable_progress_bars()
    offline = constants.HF_HUB_OFFLINE

    def download(local: bool = False) -> str:
        return hf_hub_download(  # type: ignore[no-any-return]
            ref.repo_id,
            "config.json",
            revision=ref.revision,
            etag_timeout=constants.HF_HUB_ETAG_TIMEOUT,
            local_files_only=local,
        )

    no_network = None if offline else unreachable(constants.ENDPOINT)
    try:
        try:
            if no_network is not None:  # the cache may still hold it; else say why at once
                config_path = _cached_or_unreachable(ref, download, no_network)
            else:
                limit_s = constants.HF_HUB_ETAG_TIMEOUT + constants.HF_HUB_DOWNLOAD_TIMEOUT
                config_path = Path(_within(limit_s, download))
        except TimeoutError as late:  # a late or unreachable Hub: a cached copy still serves
            try:
                config_path = Path(download(local=True))
            except Exception:
                raise late from None
    except Exception as error:
        if not _is_hub_failure(error):
            raise
        raise _hub_error(ref, error, constants.ENDPOINT, offline) from None
    commit = config_path.parent.name  # the cache keeps files under snapshots/<commit>/
    # A repo's config.json is input like any other: bounded size and depth, no repeated key.
    config = parse_json(
        read_text(config_path, limits.JSON_FILE_BYTES, f"{ref}"), f"{ref}: config.json"
    )
    cache = _cache_file(ref, commit)
    tensors, warning = _cached_tensors(cache), None
    if tensors is None and offline:
        warning = (
            f"{ref}: safetensors headers not cached and HF_HUB_OFFLINE is set: weights computed "
            "from the config (run once online for the checkpoint's exact bytes)"
        )
    elif tensors is None and no_network is not None:
        warning = (
            f"{ref}: safetensors headers not cached and the Hub is out of reach ({no_network}): "
            "weights computed from the config"
        )
    elif tensors is None:
        tensors, warning = _fetch_tensors(ref, commit)
        if tensors is not None:
            _store(cache, tensors)
    return HubModel(ref, config, commit, tensors, (warning,) if warning else ())
