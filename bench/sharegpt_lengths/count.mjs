// Token counts of each (id, prompt, completion) line of a JSONL file, as a CSV: the Llama-3
// tokenizer with BOS and without EOS, and the Mistral tokenizer with BOS (and sentencepiece's
// leading space), which is what Hugging Face's tokenizer(text).input_ids gives for each.
import llama3Tokenizer from 'llama3-tokenizer-js';
import mistralTokenizer from 'mistral-tokenizer-js';
import fs from 'fs';
import readline from 'readline';

const [input, output] = process.argv.slice(2);
const out = fs.createWriteStream(output);
out.write('id,prompt_llama3,output_llama3,prompt_mistral,output_mistral\n');
const llama3 = (text) => llama3Tokenizer.encode(text, {bos: true, eos: false}).length;
const mistral = (text) => mistralTokenizer.encode(text, true, true).length;
for await (const line of readline.createInterface({input: fs.createReadStream(input)})) {
  const [id, prompt, completion] = JSON.parse(line);
  out.write(`${id},${llama3(prompt)},${llama3(completion)},${mistral(prompt)},${mistral(completion)}\n`);
}
out.end();
