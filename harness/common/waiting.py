"""The one bounded wait of the harness (tenacity): poll a probe until it returns something truthy, and on
timeout say what was awaited and what was seen last.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

T = TypeVar("T")


class WaitTimeout(Exception):
    """A bounded wait expired. `str()` says what for, the bound in seconds, and the last observation."""


def wait_for(
    probe: Callable[[], T], *, timeout: float, what: str, interval: float = 0.1,
    describe: Callable[[], Any] | None = None, fatal: tuple[type[BaseException], ...] = (),
) -> T:
    """Call `probe()` every `interval` seconds until it returns a truthy value; return that value.

    `timeout` in seconds. Exceptions from the probe count as "not yet" and are reported if it times out,
    except those of the `fatal` types, which end the wait at once (a component that exited).
    Raises WaitTimeout naming `what`, the bound, and `describe()` (or the last probe result/error).
    """
    last: dict[str, Any] = {}

    def attempt() -> Any:
        try:
            v = probe()
            last["value"] = v
            return v
        except fatal:
            raise
        except Exception as e:  # noqa: BLE001 - reported in the timeout message
            last["value"] = f"{type(e).__name__}: {e}"
            return None

    retrying = Retrying(
        stop=stop_after_delay(timeout), wait=wait_fixed(interval), retry=retry_if_result(lambda v: not v)
    )
    try:
        return retrying(attempt)
    except RetryError:
        seen = describe() if describe else last.get("value")
        raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what}; last seen: {seen}") from None
