"""The shape of the module-6 lab's prefix_cache_bench.py, as the lab hands it out (a vLLM server with
Qwen2.5-7B-Instruct on localhost:8000). tests/library/test_module06_server.py runs it against the
course server changing nothing but the base_url. Note its pitfall: the warmup sends exactly the request it
then times as "NO CACHE", so with prefix caching on both timed requests are cache hits."""
import time

from openai import OpenAI

client = OpenAI(base_url="http://localhost:8000/v1", api_key="EMPTY")
MODEL = "Qwen/Qwen2.5-7B-Instruct"

SYSTEM_PROMPT = ("你是一个专业的AI助手，擅长解释大语言模型推理中的技术细节。"
                 "You are an expert assistant for LLM inference. " * 20
                 + "请详细、准确地回答用户的问题。" * 20)


def measure_ttft(messages):
    start = time.time()
    stream = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=50, stream=True)
    ttft = None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            ttft = time.time() - start
            break
    return ttft


q1 = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "什么是KV Cache？"}]
q2 = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "什么是Prefix Caching？"}]

print("预热...")
measure_ttft(q1)

t_no_cache = measure_ttft(q1)
print(f"NO CACHE TTFT: {t_no_cache * 1000:.1f} ms")
t_cache = measure_ttft(q2)
print(f"CACHE TTFT: {t_cache * 1000:.1f} ms")
print(f"加速: {(1 - t_cache / t_no_cache) * 100:.1f}%")
