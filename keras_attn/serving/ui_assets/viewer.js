// The attention viewer of `keras-attn serve --ui`. It talks to the server's own REST API only
// (GET /v1/models/NAME/metadata, POST /v1/models/NAME:predict) and writes every model output
// into the page as text (textContent), never as markup.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const VIEWS = ["translator", "captioner", "answerer", "generator", "classifier", "unknown"];
  let current = null; // {name, kind, signatures}
  let decoding = {}; // model name -> how its export decodes ({decoder, beam_size, ...}) or null

  function element(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function setStatus(text, isError = false) {
    $("status").textContent = text;
    $("status").classList.toggle("error", isError);
  }

  async function fetchJson(url, init) {
    const response = await fetch(url, init);
    let body = null;
    try {
      body = await response.json();
    } catch (error) {
      body = { error: `HTTP ${response.status}` };
    }
    if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
    return body;
  }

  const modelPath = (name) => `/v1/models/${encodeURIComponent(name)}`;

  // POST :predict in the columnar format; returns the outputs as {name: value}.
  async function predict(signature, inputs) {
    const body = await fetchJson(`${modelPath(current.name)}:predict`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ signature_name: signature, inputs }),
    });
    return body.outputs;
  }

  // Runs `work`, showing "working" and then "ready" or the server's error message.
  async function busy(work) {
    setStatus("working…");
    try {
      await work();
      setStatus("ready");
    } catch (error) {
      setStatus(String(error.message || error), true);
    }
  }

  function outputsOf(signatures, key) {
    return Object.keys((signatures[key] && signatures[key].outputs) || {});
  }

  function kindOf(signatures) {
    const outputs = new Set(Object.keys(signatures).flatMap((key) => outputsOf(signatures, key)));
    if (outputs.has("translation")) return "translator";
    if (outputs.has("caption")) return "captioner";
    if (outputs.has("answer")) return "answerer";
    if (outputs.has("continuation")) return "generator";
    if (outputs.has("classes") && outputs.has("scores")) return "classifier";
    return "unknown";
  }

  // The first of `names` that the model has as a signature.
  function pick(names) {
    return names.find((name) => name in current.signatures);
  }

  const trimmed = (tokens) => tokens.filter((token) => token !== "");
  const nonEmptyLines = (text) =>
    text.split("\n").map((line) => line.trim()).filter((line) => line !== "");

  // ----------------------------------------------------------------- translator

  function heatmap(targetTokens, sourceTokens, weights) {
    const table = element("table", null, "heatmap");
    const head = table.createTHead().insertRow();
    head.appendChild(element("th"));
    for (const token of sourceTokens) head.appendChild(element("th", token, "source-token"));
    const max = Math.max(1e-9, ...weights.slice(0, targetTokens.length).flatMap(
      (row) => row.slice(0, sourceTokens.length)));
    const body = table.createTBody();
    targetTokens.forEach((target, t) => {
      const row = body.insertRow();
      row.dataset.target = String(t);
      const label = element("th", target, "target");
      label.title = "click to highlight the source tokens this word attends to";
      row.appendChild(label);
      sourceTokens.forEach((source, s) => {
        const weight = weights[t][s];
        const cell = row.insertCell();
        cell.dataset.weight = String(weight);
        cell.title = `${target} → ${source}: ${weight.toFixed(4)}`;
        cell.style.backgroundColor = `rgba(37, 99, 235, ${weight / max})`;
      });
    });
    return table;
  }

  // Marks target row `t` of a heatmap and the source tokens it puts the most weight on.
  function selectTarget(result, t) {
    const rows = result.querySelectorAll("tbody tr");
    const heads = result.querySelectorAll("th.source-token");
    const tokens = result.querySelectorAll(".tokens .token");
    rows.forEach((row, i) => row.classList.toggle("selected", i === t));
    tokens.forEach((token, i) => token.classList.toggle("selected", i === t));
    const weights = Array.from(rows[t].querySelectorAll("td"), (cell) => Number(cell.dataset.weight));
    const max = Math.max(...weights);
    heads.forEach((head, s) => head.classList.toggle("strong", max > 0 && weights[s] >= max / 2));
  }

  function translationResult(text, outputs, i, withAlignment) {
    const result = element("div", null, "result");
    result.appendChild(element("p", text, "source"));
    result.appendChild(element("p", outputs.translation[i], "output translation"));
    result.appendChild(element("p", `log-probability ${outputs.scores[i].toFixed(4)}`,
      "note score"));
    if (!withAlignment) return result;
    const targetTokens = trimmed(outputs.tokens[i]);
    const sourceTokens = trimmed(outputs.source_tokens[i]);
    const strip = element("div", null, "tokens");
    targetTokens.forEach((token, t) => {
      const button = element("button", token, "token");
      button.type = "button";
      button.addEventListener("click", () => selectTarget(result, t));
      strip.appendChild(button);
    });
    result.appendChild(strip);
    const table = heatmap(targetTokens, sourceTokens, outputs.alignment[i]);
    table.querySelectorAll("th.target").forEach((head, t) =>
      head.addEventListener("click", () => selectTarget(result, t)));
    result.appendChild(table);
    return result;
  }

  async function translate() {
    const texts = nonEmptyLines($("translator-input").value);
    const results = $("translator-results");
    results.replaceChildren();
    if (!texts.length) return;
    const withAlignment = "translate_with_alignment" in current.signatures;
    const signature = withAlignment ? "translate_with_alignment" : pick(["translate",
      "serving_default"]);
    const outputs = await predict(signature, { text: texts });
    texts.forEach((text, i) =>
      results.appendChild(translationResult(text, outputs, i, withAlignment)));
  }

  // ----------------------------------------------------------------- captioner

  const images = {}; // view ("captioner", "answerer") -> the image shown there, {b64, url}
  let caption = null; // the outputs of the last caption

  // Shows `dataUrl` in `view`'s stage, then captions it or answers the question about it.
  function showImage(view, dataUrl) {
    images[view] = { b64: dataUrl.slice(dataUrl.indexOf(",") + 1), url: dataUrl };
    $(`${view}-image`).src = dataUrl;
    $(`${view}-overlay`).replaceChildren();
    return view === "captioner" ? runCaption() : ask();
  }

  function readAsDataUrl(blob) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result);
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(blob);
    });
  }

  async function runCaption() {
    $("captioner-overlay").replaceChildren();
    $("captioner-words").replaceChildren();
    $("captioner-caption").textContent = "";
    const outputs = await predict(pick(["caption", "serving_default"]), {
      image: [{ b64: images.captioner.b64 }],
    });
    caption = outputs;
    $("captioner-caption").textContent = outputs.caption[0];
    trimmed(outputs.tokens[0]).forEach((word, t) => {
      const button = element("button", word, "token");
      button.type = "button";
      button.addEventListener("click", () => showAttention(t));
      $("captioner-words").appendChild(button);
    });
  }

  // Overlays an attention map (H' x W' regions) on a stage's image: each region is darkened by
  // how much less weight it has than the most attended one.
  function drawOverlay(overlay, map) {
    const rows = map.length;
    const columns = map[0].length;
    const max = Math.max(1e-9, ...map.flat());
    overlay.style.gridTemplateRows = `repeat(${rows}, 1fr)`;
    overlay.style.gridTemplateColumns = `repeat(${columns}, 1fr)`;
    overlay.replaceChildren();
    map.forEach((row, r) => row.forEach((weight, c) => {
      const cell = element("div");
      cell.dataset.row = String(r);
      cell.dataset.column = String(c);
      cell.dataset.weight = String(weight);
      cell.title = `attention ${weight.toFixed(4)}`;
      cell.style.backgroundColor = `rgba(0, 0, 0, ${0.8 * (1 - weight / max)})`;
      overlay.appendChild(cell);
    }));
  }

  // Overlays caption word `t`'s attention map.
  function showAttention(t) {
    drawOverlay($("captioner-overlay"), caption.attention[0][t]);
    $("captioner-words").querySelectorAll(".token").forEach((token, i) =>
      token.classList.toggle("selected", i === t));
  }

  // ----------------------------------------------------------------- answerer

  async function ask() {
    for (const id of ["answerer-overlay", "answerer-words", "answerer-results"]) {
      $(id).replaceChildren();
    }
    $("answerer-answer").textContent = "";
    if (!images.answerer) throw new Error("choose an image or draw a scene first");
    const question = $("answerer-question").value;
    const outputs = await predict(pick(["answer", "serving_default"]), {
      image: [{ b64: images.answerer.b64 }],
      question: [question],
    });
    $("answerer-answer").textContent = outputs.answer[0];
    drawOverlay($("answerer-overlay"), outputs.attention[0]);
    const weights = outputs.question_attention[0];
    const max = Math.max(1e-9, ...weights);
    trimmed(outputs.tokens[0]).forEach((word, t) => {
      const token = element("span", word, "token");
      token.dataset.weight = String(weights[t]);
      token.title = `attention ${weights[t].toFixed(4)}`;
      token.style.backgroundColor = `rgba(37, 99, 235, ${0.6 * weights[t] / max})`;
      $("answerer-words").appendChild(token);
    });
    $("answerer-results").appendChild(labelTable(outputs.classes[0], outputs.scores[0], 5));
  }

  // ----------------------------------------------------------------- generator

  async function generate() {
    const prompt = $("generator-prompt").value;
    let outputs;
    if ("generate_with_options" in current.signatures) {
      outputs = await predict("generate_with_options", {
        prompt: [prompt],
        max_length: Number.parseInt($("generator-max-length").value, 10),
        temperature: Number($("generator-temperature").value),
        top_k: Number.parseInt($("generator-top-k").value, 10),
        top_p: Number($("generator-top-p").value),
      });
    } else {
      outputs = await predict(pick(["generate", "serving_default"]), { prompt: [prompt] });
    }
    $("generator-continuation").textContent = outputs.continuation[0];
    $("generator-score").textContent = `log-probability ${outputs.scores[0].toFixed(4)}`;
  }

  // ----------------------------------------------------------------- classifier

  async function classify() {
    const texts = nonEmptyLines($("classifier-input").value);
    const results = $("classifier-results");
    results.replaceChildren();
    if (!texts.length) return;
    const signature = pick(["predict", "serving_default"]);
    const outputs = await predict(signature, { text: texts });
    texts.forEach((text, i) => {
      const result = element("div", null, "result");
      result.appendChild(element("p", text, "source"));
      if (outputs.label) result.appendChild(element("p", outputs.label[i], "output label"));
      result.appendChild(labelTable(outputs.classes[i], outputs.scores[i]));
      results.appendChild(result);
    });
  }

  // A table of class names and their probabilities, most probable first (the first `limit`).
  function labelTable(classes, scores, limit = classes.length) {
    const table = element("table", null, "labels");
    const order = scores.map((score, c) => c).sort((a, b) => scores[b] - scores[a]);
    for (const c of order.slice(0, limit)) {
      const row = table.insertRow();
      row.appendChild(element("td", classes[c], "class-name"));
      const probability = element("td", scores[c].toFixed(4), "probability");
      probability.dataset.value = String(scores[c]);
      row.appendChild(probability);
      const bar = element("div", null, "bar");
      bar.style.width = `${100 * scores[c]}%`;
      const barCell = row.insertCell();
      barCell.className = "bar-cell";
      barCell.appendChild(bar);
    }
    return table;
  }

  // ----------------------------------------------------------------- models

  // Empties every view, so that no answer of the previous model stays on the page.
  function clearOutputs() {
    for (const id of ["translator-results", "classifier-results", "captioner-words",
      "captioner-overlay", "answerer-overlay", "answerer-words", "answerer-results"]) {
      $(id).replaceChildren();
    }
    for (const id of ["captioner-caption", "answerer-answer", "generator-continuation",
      "generator-score"]) {
      $(id).textContent = "";
    }
    for (const view of ["captioner", "answerer"]) {
      $(`${view}-image`).removeAttribute("src");
      delete images[view];
    }
    caption = null;
  }

  async function selectModel(name) {
    const metadata = await fetchJson(`${modelPath(name)}/metadata`);
    const signatures = metadata.metadata.signature_def.signature_def;
    current = { name, signatures, kind: kindOf(signatures) };
    clearOutputs();
    for (const view of VIEWS) $(view).hidden = view !== current.kind;
    $("kind").textContent = `${current.kind} · version ${metadata.model_spec.version}` +
      describeDecoding(Object.hasOwn(decoding, name) ? decoding[name] : null);
    document.body.dataset.model = name;
    if (current.kind === "translator") {
      $("translator-note").textContent = "translate_with_alignment" in signatures
        ? "Hover a cell for its weight; click a target word to highlight its row."
        : "This translator has no translate_with_alignment signature: no heatmap.";
    } else if (current.kind === "generator") {
      const options = "generate_with_options" in signatures;
      $("generator-options").hidden = !options;
      $("generator-note").textContent = options ? "" :
        "This model has no generate_with_options signature: greedy decoding.";
    } else if (current.kind === "unknown") {
      $("signatures").textContent = JSON.stringify(Object.keys(signatures), null, 2);
    }
  }

  // " · beam search, 4 beams" from an export's description ("" when it has none).
  function describeDecoding(description) {
    if (!description || typeof description.decoder !== "string") return "";
    let text = description.decoder === "beam"
      ? ` · beam search, ${Number(description.beam_size)} beams` : ` · ${description.decoder} decoding`;
    if (description.jit_compile === true) text += ", compiled";
    return text;
  }

  async function start() {
    const listing = await fetchJson("/ui/models.json");
    const models = listing.models;
    decoding = listing.decoding || {};
    const select = $("model");
    for (const name of models) {
      const option = element("option", name);
      option.value = name;
      select.appendChild(option);
    }
    if (!models.length) throw new Error("no model is available");
    select.addEventListener("change", () => busy(() => selectModel(select.value)));
    await selectModel(models[0]);
  }

  $("translator-run").addEventListener("click", () => busy(translate));
  $("generator-run").addEventListener("click", () => busy(generate));
  $("classifier-run").addEventListener("click", () => busy(classify));
  $("answerer-run").addEventListener("click", () => busy(ask));
  $("answerer-question").addEventListener("keydown", (event) => {
    if (event.key === "Enter") busy(ask);
  });
  for (const view of ["captioner", "answerer"]) {
    $(`${view}-file`).addEventListener("change", (event) => {
      const file = event.target.files[0];
      if (file) busy(async () => showImage(view, await readAsDataUrl(file)));
    });
    $(`${view}-scene`).addEventListener("click", () => busy(async () => {
      const seed = Math.floor(Math.random() * 2 ** 31);
      const response = await fetch(`/ui/scene.png?seed=${seed}&size=64`);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      await showImage(view, await readAsDataUrl(await response.blob()));
    }));
  }
  busy(start);
})();
