"""A stand-in for vLLM's OpenAI-compatible server, the one ``vllm serve`` runs (and ``trl vllm-serve``,
which TRL 1.16 turns into ``vllm serve``), answering the routes TRL's ``VLLMClient`` calls to generate:
``GET /health``, ``GET /v1/models`` and ``POST /v1/completions`` with token-id prompts
(``return_token_ids``, ``return_tokens_as_token_ids``, ``logprobs``), the reply's ``token_ids``,
``prompt_token_ids`` and per-token ``logprobs`` as vLLM gives them. A local model (the tiny one)
samples on the CPU; the weight-transfer routes are not served. ``calls`` keeps each prompt's ids with
what was generated for it and their log-probabilities."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from fastapi import Body, FastAPI, HTTPException


def vllm_app(model_dir: Path) -> FastAPI:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    app = FastAPI()
    app.state.calls = []
    lock = threading.Lock()  # one generate at a time: FastAPI answers a sync route from a thread pool

    def sample(prompt: list[int], body: dict[str, Any]) -> tuple[list[int], list[float]]:
        inputs = torch.tensor([prompt])
        with lock, torch.no_grad():
            out = model.generate(
                input_ids=inputs, attention_mask=torch.ones_like(inputs), do_sample=True,
                temperature=body.get("temperature", 1.0), top_p=body.get("top_p", 1.0), top_k=body.get("top_k") or None,
                max_new_tokens=body.get("max_tokens", 16), output_scores=True, return_dict_in_generate=True,
                eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
            )  # fmt: skip
        ids = out.sequences[0, len(prompt) :].tolist()
        # The processed (temperature-scaled) distribution's log-probabilities, as `--logprobs-mode processed_logprobs`.
        scores = [torch.log_softmax(score[0], dim=-1) for score in out.scores]
        return ids, [score[token].item() for score, token in zip(scores, ids, strict=True)]

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": str(model_dir), "object": "model"}]}

    @app.post("/v1/completions")
    def completions(body: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008  (FastAPI's way)
        prompts = body.get("prompt")
        if not isinstance(prompts, list) or not all(isinstance(p, list) for p in prompts):
            raise HTTPException(400, "this stand-in takes token-id prompts only")
        choices = []
        for prompt in prompts:
            for _ in range(int(body.get("n", 1))):
                ids, logprobs = sample(prompt, body)
                app.state.calls.append({"prompt_ids": prompt, "ids": ids, "logprobs": logprobs, "body": body})
                tokens = [f"token_id:{token}" for token in ids]
                choice: dict[str, Any] = {
                    "index": len(choices), "text": tokenizer.decode(ids), "token_ids": ids, "prompt_token_ids": prompt,
                    "finish_reason": "stop" if ids and ids[-1] == tokenizer.eos_token_id else "length", "logprobs": None,
                }  # fmt: skip
                if body.get("logprobs") is not None:
                    choice["logprobs"] = {"tokens": tokens, "token_logprobs": logprobs,
                                          "top_logprobs": [{t: lp} for t, lp in zip(tokens, logprobs, strict=True)]}  # fmt: skip
                choices.append(choice)
        return {
            "id": "cmpl-stand-in",
            "object": "text_completion",
            "model": str(model_dir),
            "choices": choices,
        }

    return app
