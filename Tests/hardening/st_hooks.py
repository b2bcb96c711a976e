"""Schemathesis hooks (loaded through SCHEMATHESIS_HOOKS=st_hooks).

`no_undocumented_server_error` replaces the built-in `not_a_server_error`:
runloopd documents two 5xx answers, 503 (starting, stopping, overloaded, the history store not answering) and
504 (runloopd could not answer in time: a stop, a manual run or an end
whose loop a handler holds; the fuzzer makes handlers sleep on purpose; a
perform whose own wait passes answers 202, not 504). Any other 5xx is a bug, and a
documented one must still carry the JSON error body (and Retry-After for 503);
`status_code_conformance` separately checks that the operation lists it.
"""

import schemathesis


@schemathesis.check
def no_undocumented_server_error(ctx, response, case):
    status = response.status_code
    if status < 500:
        return None
    if status not in (503, 504):
        raise AssertionError(f"undocumented server error {status}: {response.text[:300]}")
    body = response.json()
    code = body.get("error", {}).get("code")
    expected = {503: {"shutting_down", "overloaded", "not_ready", "store_unavailable"}, 504: {"deadline_exceeded"}}[status]
    if code not in expected:
        raise AssertionError(f"{status} with unexpected error code {code!r}")
    if status == 503 and "Retry-After" not in response.headers:
        raise AssertionError("503 without Retry-After")
    return None
