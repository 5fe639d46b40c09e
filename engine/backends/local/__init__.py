"""What only local engines need (vLLM, transformers; also the benchmark and the generation
stage): judges by name and their weights (`models`), the chat template and tokenizer (`render`,
`pieces`; judged text never a special token: `special`), the step primitive and the verdict modes
written once over it (`steps`, `modes`), and how a plan is split into prefix-sharing shards for
replicas (`sharding`). The kernel in `engine.core` (config, requests and keys, planner, store,
runner) does not depend on any of it."""
