// detail-hooks.js — what the Detail panel's parts call back into detail.js
// for, without importing it: detail.js imports them (to render), so their
// importing it would make an import cycle (scripts/js-cycles.py fails on one).
// detail.js fills these in when it loads, as timeline.js's timelineHooks are.

export const detailHooks = {
  /** Shows a thread in the panel (detail.js `select`). */
  select: (_id, _focus) => {},
  /** Fetches the panel's views again soon (detail.js `refreshDetailSoon`). */
  refreshSoon: () => {},
};
