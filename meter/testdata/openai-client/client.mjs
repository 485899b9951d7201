// Drives the meter with the official openai client: a plain call, a streamed
// call, a tool call, a streamed tool call and a refused call. Prints one JSON object with what the client saw, for
// the Go test to check against the meter's receipts.
//
// Environment: METER_BASE_URL (http://127.0.0.1:PORT/v1), METER_SCENARIO.
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: process.env.METER_BASE_URL,
  apiKey: "unused-by-the-meter",
  maxRetries: 0,
  defaultHeaders: { "Feval-Scenario": process.env.METER_SCENARIO },
});

const out = {};

const plain = await client.chat.completions.create({
  model: "kimi-k2-instruct",
  messages: [{ role: "user", content: "Summarise the change in one paragraph." }],
  max_tokens: 200,
  temperature: 0.2,
});
out.plain = { id: plain.id, usage: plain.usage, content: plain.choices[0].message.content };

const stream = await client.chat.completions.create({
  model: "glm-4.5",
  messages: [{ role: "user", content: "Stream an explanation." }],
  stream: true,
  stream_options: { include_usage: true },
});
let content = "";
let id = "";
let usage = null;
let chunks = 0;
for await (const chunk of stream) {
  chunks++;
  id = id || chunk.id;
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) content += c.delta?.content ?? "";
}
out.stream = { id, usage, content, chunks };

const tools = [{
  type: "function",
  function: {
    name: "write_file",
    description: "Write a file in the workspace.",
    parameters: { type: "object", properties: { path: { type: "string" }, content: { type: "string" } }, required: ["path", "content"] },
  },
}];
const tool = await client.chat.completions.create({
  model: "deepseek-v3.1",
  messages: [{ role: "user", content: "[fixture-task:node-tool] Fix the parser." }],
  tools,
  tool_choice: "auto",
});
out.tool = { id: tool.id, usage: tool.usage, finish: tool.choices[0].finish_reason, tool_calls: tool.choices[0].message.tool_calls };

const toolStream = await client.chat.completions.create({
  model: "qwen3-coder-480b-a35b-instruct",
  messages: [{ role: "user", content: "[fixture-task:node-tool] Fix the parser, streaming." }],
  tools,
  stream: true,
  stream_options: { include_usage: true },
});
const calls = [];
let streamedUsage = null;
let streamedID = "";
for await (const chunk of toolStream) {
  streamedID = streamedID || chunk.id;
  if (chunk.usage) streamedUsage = chunk.usage;
  for (const c of chunk.choices) {
    for (const tc of c.delta?.tool_calls ?? []) {
      calls[tc.index] ??= { name: "", arguments: "" };
      if (tc.function?.name) calls[tc.index].name += tc.function.name;
      if (tc.function?.arguments) calls[tc.index].arguments += tc.function.arguments;
    }
  }
}
out.toolStream = { id: streamedID, usage: streamedUsage, calls };

try {
  await client.chat.completions.create({ model: "not-allowlisted", messages: [{ role: "user", content: "hi" }] });
  out.refused = { status: 0 };
} catch (e) {
  out.refused = { status: e.status, code: e.code, type: e.type };
}

process.stdout.write(JSON.stringify(out) + "\n");
