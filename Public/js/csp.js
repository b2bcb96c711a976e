// csp.js — owns the record of Content-Security-Policy violations this page
// causes: each `securitypolicyviolation` event is kept in
// window.__cspViolations (read by the browser tests; handy in devtools) and
// reported on the console. Imported first by main.js so it listens before
// the other modules run. The policy itself is the <meta> in index.html
// (and the server's header).

window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  const v = { directive: e.effectiveDirective, blocked: e.blockedURI, source: e.sourceFile, line: e.lineNumber, sample: e.sample };
  window.__cspViolations.push(v);
  console.error('CSP violation', v);
});
