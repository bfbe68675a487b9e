from tests.integration.test_slack_app_soak import *  # noqa
from tests.integration import test_slack_app_soak as soak

def test_dbg(stack, played, monkeypatch):
    seen = []
    orig = soak.Poller.run
    def run(self, stop):
        seen.append(self)
        return orig(self, stop)
    monkeypatch.setattr(soak.Poller, "run", run)
    try:
        soak.test_a_thousand_notices_through_two_notifiers_with_slack_failing_are_each_told_once(stack, played)
    finally:
        inv = sorted((i for p in seen for i in p.invocations), key=lambda i: -i["seconds"])
        for i in inv[:3]: print("TOP", {k: round(v, 3) if isinstance(v, float) else v for k, v in i.items()})
