"""A hard cost budget for one run (`--max-cost USD`, `max_cost_usd:`).

Before every provider attempt (a cached answer is free) the gateway reserves that call's
worst case: its prompt tokens, counted offline, at the model's input price plus `max_tokens`
at its output price. When what is spent plus what is reserved plus this call would cross the
budget the call is not made: `BudgetExceeded` stops the run before it (the runner starts no
further case; finished work is kept; exit 3). When the provider answers, the reservation is
replaced by the cost of the tokens it reports. Prices are the model's `price:` in abtest.yaml
(USD per million tokens) when given, else litellm's cost table; the embedded model costs 0. A
budget over a model with neither is refused before the first call: an unknown cost cannot be
bounded.
"""

from __future__ import annotations

import threading

from abtest.errors import IncompleteRunError, UserError
from abtest.core.models import ModelSpec
from abtest.llm.provider import unit_prices
from abtest.llm.provider import count_tokens


class BudgetExceeded(IncompleteRunError):
    """The next call could cross the run's budget: the run stops before it."""


class Budget:
    def __init__(self, max_usd: float, spent_usd: float = 0.0):
        self.max_usd, self.spent_usd = float(max_usd), float(spent_usd)
        self._reserved = 0.0
        self._lock = threading.Lock()
        self.stopped: str | None = None

    def check_prices(self, specs: list[ModelSpec]) -> None:

        for spec in specs:
            if unit_prices(spec) is None:
                raise UserError(f"--max-cost: no price is known for model {spec.model} (give it "
                                "price: {input_per_mtok: …, output_per_mtok: …} in abtest.yaml)",
                                field="max_cost_usd")

    def reserve(self, spec: ModelSpec, messages: list[dict], max_tokens: int) -> float:
        """Hold this call's worst case, or raise BudgetExceeded (nothing is sent)."""

        in_p, out_p = unit_prices(spec) or (0.0, 0.0)
        prompt, _ = count_tokens(spec.model, messages)
        worst = prompt * in_p + max_tokens * out_p
        with self._lock:
            if self.stopped or self.spent_usd + self._reserved + worst > self.max_usd + 1e-12:
                if not self.stopped:
                    self.stopped = (f"stopped at budget: ${self.spent_usd:.4f} spent of "
                                    f"${self.max_usd:.4f}; the next call ({spec.model}, up to "
                                    f"${worst:.4f}) could cross it")
                raise BudgetExceeded(self.stopped)
            self._reserved += worst
        return worst

    def settle(self, reserved: float, actual: float | None) -> None:
        """The call answered (or failed): its real cost replaces what was held for it."""
        with self._lock:
            self._reserved -= reserved
            self.spent_usd += reserved if actual is None else actual
