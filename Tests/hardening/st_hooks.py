"""Schemathesis hooks (loaded through SCHEMATHESIS_HOOKS=st_hooks).

`no_undocumented_server_error` replaces the built-in `not_a_server_error`:
runloopd documents two 5xx answers, 503 (starting, stopping, overloaded, the history store not answering) and
504 (runloopd could not answer in time: a stop, a manual run or an end
whose loop a handler holds; the fuzzer makes handlers sleep on purpose; a
perform whose own wait passes answers 202, not 504). Any other 5xx is a bug, and a
documented one must still carry the JSON error body (and Retry-After for 503);
`status_code_conformance` separately checks that the operation lists it.

`positive_data_acceptance_of_valid_data` replaces the built-in
`positive_data_acceptance` (ST202, "schema-valid request rejected"): it is the
same check, applied only when every path parameter of the request satisfies
its own schema. Schemathesis's stateful phase can label a case positive whose
path parameter fails that schema (a CI run sent the mode
`W%2C%5D23RR_s1%21A%EF%BF%BDz22Qdq%3FwA` to `DELETE .../modes/{mode}`: it
decodes to a name with U+FFFD, outside the schema's `^[!-~]+$`, and
schemathesis called runloopd's 400 a rejection of valid data; the same class of
false positive as schemathesis issues #2983 and #3707). Path parameters are
checked as the server sees them, percent-decoded. Each case skipped that
way is appended to $ST_SKIPPED_LOG, and the test reports their count.
"""

import os
from urllib.parse import unquote

import schemathesis
from schemathesis.specs.openapi.checks import positive_data_acceptance
from hypothesis.internal.conjecture import optimiser as _optimiser

# Hypothesis 6.155's target optimiser (schemathesis's fuzzing phase always
# targets each operation's success rate) can index past a shorter attempt's
# spans: `attempt.spans[j]` in `Optimiser.hill_climb` raised "IndexError: Index
# 25 out of range [-25, 25)" in a CI-like run here (kept seed 457371719,
# DELETE /api/threads/{id}/tasks), and schemathesis reported the fuzzer's own
# crash as an error of that operation. A crashed climb ends that target's
# optimisation, as a climb that found nothing better would; generation and
# every check go on as before.
_hill_climb_run = _optimiser.Optimiser.run


def _run_unless_the_climb_crashes(self):
    try:
        _hill_climb_run(self)
    except IndexError:
        pass


_optimiser.Optimiser.run = _run_unless_the_climb_crashes


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


@schemathesis.check
def positive_data_acceptance_of_valid_data(ctx, response, case):
    # Schemathesis keeps path parameters percent-encoded; runloopd validates
    # what they decode to, so that is what must satisfy the schema.
    sent = case.path_parameters or {}
    outside = [
        f"{parameter.name}={sent[parameter.name]!r}"
        for parameter in case.operation.path_parameters
        if isinstance(sent.get(parameter.name), str)
        and not parameter.is_valid(unquote(sent[parameter.name], errors="replace"))
    ]
    # POST /predict: seconds is required only on a manual thread, which is
    # the thread's style, not anything a schema of the body can say; its
    # 400 "seconds is required" there is the documented answer.
    if (
        case.operation.method.upper() == "POST"
        and case.operation.path == "/api/threads/{id}/predict"
        and response.status_code == 400
    ):
        try:
            error = (response.json() or {}).get("error") or {}
        except ValueError:
            error = {}
        body = case.body if isinstance(case.body, dict) else {}
        if error.get("field") == "seconds" and body.get("seconds") is None:
            return None
    if outside:
        log = os.environ.get("ST_SKIPPED_LOG")
        if log:
            with open(log, "a") as f:
                f.write(f"{case.operation.label} {response.status_code} {' '.join(outside)}\n")
        return None
    return positive_data_acceptance(ctx, response, case)
