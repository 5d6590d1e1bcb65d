"""specdec: plan, measure and check speculative decoding. Layout and rules: docs/architecture.md."""
