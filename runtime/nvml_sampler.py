"""Sample one GPU's memory through NVML on a background thread while something else runs."""

import threading
import time

from servecap.ledger.errors import SpecError

from .nvml import Nvml


class NvmlSampler:
    """Device used bytes every interval_s until stop(); peak and samples for the report.
    Construction fails with the NVML module's one-line SpecError when no driver is there."""

    def __init__(self, index: int, interval_s: float = 0.25) -> None:
        try:
            self.nvml = Nvml(index, f"cuda:{index}")
        except SpecError as exc:
            raise SpecError("--nvml", index, exc.allowed.replace("; use --device cpu", "") +
                            ": drop --nvml, or run load on the server's machine") from None
        self.index, self.interval_s = index, interval_s
        self.samples: list[tuple[float, int]] = []
        self.total_bytes = self.nvml.read().total_bytes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)

    def __enter__(self) -> "NvmlSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), self.nvml.read().used_bytes))
            self._stop.wait(self.interval_s)

    def summary(self) -> dict:
        used = [b for _, b in self.samples]
        return {"device_index": self.index, "num_samples": len(used),
                "total_bytes": self.total_bytes,
                "peak_used_bytes": max(used) if used else None,
                "first_used_bytes": used[0] if used else None}
