"""Without any Stan backend, pydial's numpy engine works and every Stan-needing call raises StanBackendError.

A fresh interpreter is run with the Stan of httpstan made unimportable (an import hook refuses the
modules ``stan`` and ``httpstan``, as on a platform without httpstan wheels) and ``CMDSTAN`` pointing
to no CmdStan; no Stan program is compiled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import importlib.abc, json, sys

    class NoStan(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("stan", "httpstan"):
                raise ImportError(f"No module named {name!r} (not installed here)")
            return None

    sys.meta_path.insert(0, NoStan())
    import pydial
    from pydial.stan import StanBackendError, backend_available
    out = {"available": [backend_available(b) for b in ("cmdstanpy", "httpstan")]}
    data = pydial.simulate(N=5, K=2, rank=1, n_llm=2000, n_human=400, seed=1).comparisons
    res = pydial.fit(data, "dial-anc")
    out["fit_ok"] = bool(res.ok)
    for name, call in [("stan_backend", lambda: pydial.stan_backend()),
                       ("posterior", lambda: pydial.posterior(data, chains=1, draws=10, warmup=10)),
                       ("engine", lambda: pydial.fit(data, "human", engine="stan")),
                       ("httpstan", lambda: pydial.stan_backend("httpstan")),
                       ("cmdstanpy", lambda: pydial.stan_backend("cmdstanpy"))]:
        try:
            call()
            out[name] = None
        except StanBackendError as exc:
            out[name] = str(exc)
    print(json.dumps(out))
""")


def test_without_stan_numpy_engine_works_and_stan_calls_name_both_installs(tmp_path):
    env = {**os.environ, "CMDSTAN": str(tmp_path / "no-cmdstan")}
    env.pop("PYDIAL_STAN_BACKEND", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["available"] == [False, False]
    assert out["fit_ok"]
    for name in ("stan_backend", "posterior", "engine"):
        msg = out[name]
        assert msg is not None, f"{name} did not raise StanBackendError"
        assert "python -m cmdstanpy.install_cmdstan" in msg and 'pip install "pydial[httpstan]"' in msg, msg
    assert "pydial[httpstan]" in out["httpstan"]
    assert "cmdstanpy.install_cmdstan" in out["cmdstanpy"]
