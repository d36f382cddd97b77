"""More values the scanner sees on the host (values.py `cpu_origin`, context.py `on_host_values`):
arithmetic or a comparison with a NumPy array (a device tensor refuses one), a name a pandas-only
method was called on (`s.isna()`), a parameter annotated `np.ndarray`, `self.x` that every
assignment in its class makes a NumPy array, a tensor built from what `json.load` returns, and
control flow on such a value (`if (counts < 0).any():`). A name that may hold a device tensor
stays must-port. Small trees, whole pipeline (test_host_values.py's helpers)."""

from __future__ import annotations

from test_host_values import contexts, line_of

HELPERS = """
    import json
    import pandas as pd


    def assign(a, n):
        u, v = np.zeros(n + 1), np.zeros(n + 2)
        minv, used = np.full(n + 2, np.inf), np.zeros(n + 2, bool)
        cur = a[0] - u[0] - v[1:]
        improve = (~used[1:]) & (cur < minv[1:])
        return cur[improve]  # HOST-ARRAY


    def moved(a, n, device):
        v = np.zeros(n + 2)
        cur = a[0] - v[0]
        cur = cur.to(device)
        return cur[cur > 0]  # STEP-MOVED


    def scaled(a):
        s = np.sqrt(2.0)
        z = a * s
        return z[z > 0]  # STEP-SCALAR


    def column(table):
        df = table.df
        keys = df["key"]
        mask = ~keys.isna()
        return keys[mask]  # HOST-PANDAS


    def rebound(table, device):
        keys = table.df["key"]
        mask = ~keys.isna()
        keys = torch.as_tensor(keys.to_numpy()).to(device)
        return keys[keys > 0]  # STEP-REBOUND


    def annotated(a: np.ndarray, b):
        return a[a > b]  # HOST-ANNOTATED


    def annotated_tensor(a: torch.Tensor, b):
        return a[a > b]  # STEP-ANNOTATED


    def stats(path):
        with open(path) as f:
            st = json.load(f)
        counts = torch.as_tensor(st["pos"], dtype=torch.float32)
        if (counts < 0).any():  # HOST-JSON
            raise ValueError("negative counts")
        return counts


    def given(pos):
        counts = torch.as_tensor(pos, dtype=torch.float32)
        if (counts < 0).any():  # STEP-GIVEN
            raise ValueError("negative counts")
        return counts


    class Episodes:
        def __init__(self, n):
            self.start = np.zeros(n, dtype=np.int64)
            self.pos = 0

        def truncate(self):
            if (self.start != self.pos).any():  # HOST-ATTR
                self.start[:] = self.pos


    class Moving:
        def __init__(self, n):
            self.begin = np.zeros(n)

        def to(self, device):
            self.begin = torch.zeros(3, device=device)

        def clip(self):
            if (self.begin != 1).any():  # STEP-ATTR
                return 1


    class Track:
        def __init__(self, n):
            self.last = np.zeros(n)

        def check(self):
            if (self.last > 0).any():  # STEP-SUB
                return 1


    class CudaTrack(Track):
        def __init__(self, n, device):
            super().__init__(n)
            self.last = torch.zeros(n, device=device)
"""

FORWARD = """
    n = x.size(0)
    parts = [assign(x, n), moved(x, n, x.device), scaled(x), column(self), rebound(self, x.device),
             annotated(x, 0), annotated_tensor(x, 0), stats("s.json"), given(x)]
    episodes, moving = Episodes(n), Moving(n)
    episodes.truncate()
    moving.clip()
    track = Track(n)
    track.check()
    return self.lin(x) + sum(p.sum() for p in parts)
"""


def test_host_forms(tmp_path):
    got, lines = contexts(tmp_path, HELPERS, FORWARD)
    at = lambda tag: line_of(lines, tag)  # noqa: E731
    assert got[("NR1504", at("HOST-ARRAY"))] == "host"  # cur = a[0] - u[0] - v[1:]: with a NumPy array
    assert got[("NR1504", at("HOST-PANDAS"))] == "host"  # keys.isna(): no tensor has it
    assert got[("NR1504", at("HOST-ANNOTATED"))] == "host"  # a: np.ndarray
    assert got[("NR1506", at("HOST-JSON"))] == "host"  # torch.as_tensor of json.load's data
    assert got[("NR1506", at("HOST-ATTR"))] == "host"  # self.start = np.zeros(n), the class's one value


def test_values_that_may_be_on_the_device_stay(tmp_path):
    got, lines = contexts(tmp_path, HELPERS, FORWARD)
    at = lambda tag: line_of(lines, tag)  # noqa: E731
    assert got[("NR1504", at("STEP-MOVED"))] == "step"  # cur = cur.to(device)
    assert got[("NR1504", at("STEP-SCALAR"))] == "step"  # a NumPy scalar times a tensor: on its device
    assert got[("NR1504", at("STEP-REBOUND"))] == "step"  # keys reassigned after keys.isna()
    assert got[("NR1504", at("STEP-ANNOTATED"))] == "step"  # a: torch.Tensor
    assert got[("NR1506", at("STEP-GIVEN"))] == "step"  # torch.as_tensor(pos) keeps pos's device
    assert got[("NR1506", at("STEP-ATTR"))] == "step"  # self.begin is also a device tensor in the class
    assert got[("NR1506", at("STEP-SUB"))] == "step"  # a subclass makes self.last a device tensor
