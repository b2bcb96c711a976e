"""The dashboard's SSE parser (Public/js/sse.js), run in the page: it must read
the stream as EventSource does, however the bytes are chunked."""

STREAM = (
    ": heartbeat\r\n"
    "event: thread\r\nid: 7\r\ndata: {\"a\":1}\r\n\r\n"
    "retry: 1500\n"
    "event: multi\ndata: one\ndata:  two\ndata\n\n"
    ": ping\n\n"
    "data: no event name\r\r"
    "event: empty\n\n"
    "id: 8\nevent: cr\rdata:x\r\n\r\n"
    "event: unfinished\ndata: dropped at the end"
)

EXPECTED = [
    {"type": "thread", "data": '{"a":1}', "lastEventId": "7"},
    {"type": "multi", "data": "one\n two\n", "lastEventId": "7"},
    {"type": "message", "data": "no event name", "lastEventId": "7"},
    {"type": "cr", "data": "x", "lastEventId": "8"},
]


def test_sse_parser_any_chunking(driver):
    result = driver.execute_async_script(
        """
        const [text, done] = arguments;
        import('/js/sse.js').then(({ SSEParser }) => {
          const runs = [];
          for (const size of [1, 2, 3, 7, text.length]) {
            const events = [];
            const p = new SSEParser((e) => events.push(e));
            for (let i = 0; i < text.length; i += size) p.feed(text.slice(i, i + size));
            p.end();
            runs.push({ size, events, retry: p.retry, lastEventId: p.lastEventId });
          }
          done(runs);
        }, (e) => done(String(e)));
        """,
        STREAM,
    )
    assert isinstance(result, list), result
    for run in result:
        assert run["events"] == EXPECTED, run["size"]
        assert run["retry"] == 1500 and run["lastEventId"] == "8"
