//! The turn loop through parlance's public API, as a program outside its workspace would write it:
//! analyze a template, render a conversation to ids, parse a completion, turn it into the next
//! request's assistant message, bridge to the next prompt. Arguments: a chat template and the
//! folder of its `tokenizer.json` (Qwen3's: its completion below is written in Qwen3's syntax).

use std::sync::Arc;

use parlance::{
    AnalyzeOptions, ArgumentsAs, ChatTemplate, Conversation, Format, ParseOptions, Parser, RenderOptions, Renderer,
    Tokenizer,
};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, template, tokenizer] = &args[..] else {
        return Err("usage: parlance-outside-api TEMPLATE TOKENIZER_DIR".into());
    };
    let template = ChatTemplate::from_path(template)?;
    let format = Arc::new(Format::from_template(&template, &AnalyzeOptions::default())?);
    let tokenizer = Arc::new(Tokenizer::from_path(tokenizer)?);
    let options = RenderOptions { add_generation_prompt: true, ..Default::default() };
    let renderer = Renderer::new(template.clone(), format.clone(), tokenizer.clone(), options.clone())?;
    let tools = vec![json!({"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})];
    let conversation = Conversation {
        messages: vec![json!({"role": "user", "content": "Weather in Paris?"})],
        tools: Some(tools.clone()),
        documents: None,
    };
    let prompt = renderer.render(&conversation)?;
    assert_eq!(prompt.ids, tokenizer.encode_rendered(&template.render(&conversation, &options)?)?);
    let completion = tokenizer.encode_rendered(
        "<think>\nParis.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>",
    )?;
    let stop = completion.iter().position(|id| renderer.stop_token_ids().contains(id)).unwrap_or(completion.len());
    let request = ParseOptions { tools: tools.clone(), ..Default::default() };
    let parsed = Parser::new(&format, &request).parse(&tokenizer.decode(&completion[..stop])?);
    let assistant = renderer.to_assistant_message(&parsed, ArgumentsAs::Object);
    assert_eq!(assistant["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
    let result = json!({"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"], "content": "21 C"});
    let next = renderer.bridge(&prompt, &completion, &[result], Some(&tools))?;
    assert!(next.ids.starts_with(&prompt.ids) && next.ids.len() > prompt.ids.len() + completion.len());
    println!("turn loop ok: prompt {} ids, next prompt {} ids", prompt.ids.len(), next.ids.len());
    Ok(())
}
