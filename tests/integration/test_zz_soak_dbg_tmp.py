from tests.integration.test_slack_app_soak import *  # noqa
from tests.integration import test_slack_app_soak as soak

def test_dbg(stack, played, monkeypatch):
    seen = []
    orig = soak.Poller.run
    def run(self, stop):
        seen.append(self)
        return orig(self, stop)
    monkeypatch.setattr(soak.Poller, "run", run)
    started = time.monotonic()
    try:
        soak.test_a_thousand_notices_through_two_notifiers_with_slack_failing_are_each_told_once(stack, played)
    finally:
        inv = [i for p in seen for i in p.invocations]
        print("TOTAL", time.monotonic() - started, "invocations", len(inv), "sum wall", sum(i["wall"] for i in inv), "sum in_slack", sum(i["in_slack"] for i in inv))
