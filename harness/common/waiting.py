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


#: Seconds between the progress lines of a long wait (docs: no silent minute anywhere).
SAY_EVERY = 20.0


def wait_progressing(
    probe: Callable[[], T], *, state: Callable[[], Any], stall: float, what: str, cap: float = 3600.0,
    interval: float = 0.5, say: Callable[[str], None] | None = None, every: float = SAY_EVERY,
    fatal: tuple[type[BaseException], ...] = (),
) -> T:
    """Like `wait_for`, but bounded by progress, not by a fixed budget: call `probe()` every `interval` seconds
    until it returns a truthy value and return it; `state()` says where things are (anything comparable: "9 of 12
    CRDs Established", a rollout's message). The wait goes on while that state keeps changing, and fails only when
    it did not change for `stall` seconds (or after `cap` seconds in all). Every `every` seconds it says what it
    waits for and the state (`say`), so no wait is silent. Raises WaitTimeout naming `what`, how long nothing
    moved, and the last state. Exceptions of the `fatal` types end the wait at once (a component that exited)."""
    import time as _time

    t0 = _time.monotonic()
    seen: dict[str, Any] = {"state": object(), "moved": t0, "said": t0, "value": None}

    def attempt() -> Any:
        now = _time.monotonic()
        try:
            cur = state()
        except Exception as e:  # noqa: BLE001 - a state that cannot be read is a state too (reported)
            cur = f"{type(e).__name__}: {e}"
        if cur != seen["state"]:
            seen["state"], seen["moved"] = cur, now
        if say is not None and now - seen["said"] >= every:
            seen["said"] = now
            say(f"waiting for {what} ({now - t0:.0f}s so far): {cur}")
        try:
            v = probe()
        except fatal:
            raise
        except Exception as e:  # noqa: BLE001 - "not yet", reported if it stalls
            seen["value"] = f"{type(e).__name__}: {e}"
            return None
        seen["value"] = v
        return v

    def stop(retry_state: Any) -> bool:
        now = _time.monotonic()
        return now - seen["moved"] >= stall or now - t0 >= cap

    try:
        return Retrying(stop=stop, wait=wait_fixed(interval), retry=retry_if_result(lambda v: not v))(attempt)
    except RetryError:
        now = _time.monotonic()
        why = (f"nothing moved for {now - seen['moved']:.0f}s" if now - seen["moved"] >= stall
               else f"still moving after {cap:g}s")
        raise WaitTimeout(f"gave up waiting for {what} after {now - t0:.0f}s: {why}; last seen: {seen['state']}"
                          + (f" ({seen['value']})" if seen["value"] not in (None, False) else "")) from None
