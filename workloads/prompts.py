"""The fixed prompt set of the llm workload (short questions, answered in order)."""

PROMPTS = (
    "Why is the sky blue?",
    "Explain what a container image is in two sentences.",
    "Write a haiku about supercomputers.",
    "What is the capital of Switzerland?",
    "Summarise the idea of message passing in parallel computing.",
    "List three uses of graphics processors besides graphics.",
    "What does a compiler do?",
    "Give a short definition of machine learning.",
)
