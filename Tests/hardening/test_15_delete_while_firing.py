"""Deleting observers and timers while they fire, over HTTP, against the real
binary, while the liveness prober watches it.

CoreFoundation frees an observer's context at `CFRunLoopObserverInvalidate`,
and `__CFRunLoopDoObservers` reads it unretained just before each callout.
When runloopd's observers were blocks, an invalidation landing between the
two freed the block CF was about to call: the predict differential crashed
so once, and the engine test `InvalidateWhileFiringTests`, which invalidates
from another thread as fast as it can on a loop turning every 0.2 ms,
crashed 5 runs of 9 on the old records.
Over HTTP that window is rarely hit (the binary before the fix survived 3
runs of this test); what this test holds is what HTTP can check: four
clients each keep a loop turning every 0.5 ms (a repeating timer), and each
round adds an observer of every activity and a 0.5 ms timer to it, then
deletes both at once, most of them as they fire. The server must stay up
and answer every request, the loops keep turning, and the tables of deleted
ones stay bounded.
"""

import time
from concurrent.futures import ThreadPoolExecutor

from conftest import figure

ROUND_SECONDS = 6
# Clients at once, each on a thread of its own.
CLIENTS = 4
# The worker keeps an invalidated record until its table holds twice its
# limit (32 observers, 256 timers), long after any callout in flight.
OBSERVER_TABLE_BOUND = 2 * 32
TIMER_TABLE_BOUND = 2 * 256


def attack(server, rounds_out):
    """One client's rounds on a thread of its own: an observer and a timer
    added, then both deleted at once, until the time is up."""
    thread = server.thread()
    ticker = server.post(f"/api/threads/{thread}/timers", {"interval": 0.0005})
    assert ticker.status_code == 201, ticker.text
    rounds = observers_firing = timers_firing = 0
    deadline = time.monotonic() + ROUND_SECONDS
    while time.monotonic() < deadline:
        observer = server.post(f"/api/threads/{thread}/observers", {"activities": "all"})
        assert observer.status_code == 201, observer.text
        timer = server.post(f"/api/threads/{thread}/timers", {"interval": 0.0005, "delay": 0})
        assert timer.status_code == 201, timer.text
        gone = server.delete(f"/api/threads/{thread}/observers/{observer.json()['id']}")
        assert gone.status_code == 200, gone.text
        assert gone.json()["valid"] is False
        stopped = server.delete(f"/api/threads/{thread}/timers/{timer.json()['id']}")
        assert stopped.status_code == 200, stopped.text
        assert stopped.json()["valid"] is False
        observers_firing += gone.json()["fired"] > 0
        timers_firing += stopped.json()["fires"] > 0
        rounds += 1
    observers = server.get(f"/api/threads/{thread}/observers").json()["observers"]
    timers = server.get(f"/api/threads/{thread}/timers").json()["timers"]
    ticks = server.get(f"/api/threads/{thread}/timers/{ticker.json()['id']}").json()["fires"]
    rounds_out.append((rounds, observers_firing, timers_firing, len(observers), len(timers), ticks))


def test_deleting_observers_and_timers_as_they_fire(server_factory):
    server = server_factory()
    results = []
    with ThreadPoolExecutor(CLIENTS) as pool:
        for future in [pool.submit(attack, server, results) for _ in range(CLIENTS)]:
            future.result()
    assert server.proc.poll() is None, "the server died"
    assert server.healthy()
    rounds = sum(r[0] for r in results)
    observers_firing = sum(r[1] for r in results)
    timers_firing = sum(r[2] for r in results)
    # The attack reached its window: most were deleted after they had fired,
    # on loops that kept turning.
    assert rounds >= 50, f"only {rounds} rounds in {ROUND_SECONDS} s"
    assert observers_firing * 2 > rounds, f"{observers_firing} of {rounds} observers had fired"
    assert timers_firing > 0, f"none of {rounds} timers had fired"
    for _, _, _, observers, timers, ticks in results:
        assert observers <= OBSERVER_TABLE_BOUND, f"{observers} observers kept"
        assert timers <= TIMER_TABLE_BOUND, f"{timers} timers kept"
        assert ticks > 1000, f"a ticker fired {ticks} times in {ROUND_SECONDS} s: its loop stalled"
    figure("delete_while_firing_rounds", rounds)
    figure("delete_while_firing_observers_fired", observers_firing)
    figure("delete_while_firing_timers_fired", timers_firing)
