"""One file per model family the engine reads (bert.py, gpt2.py, gptneox.py, llama.py, qwen2.py; on Llama's block,
today's qwen3.py, mistral.py, gemma3.py): each says the config.json model_type it reads (MODEL_TYPE) and gives
config_from_hf, convert, load_tokenizer, family and REFERENCE_CLASS; models.pretrained finds every module here that
declares a MODEL_TYPE, so adding a family is adding its file. Beside them: checks.py (the errors and checks every
converter shares) and descriptor.py (the Family descriptor each family's file builds, which pages and wording read)."""
