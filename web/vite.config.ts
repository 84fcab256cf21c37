// The console's build: one entry, the terminal (xterm.js) in a chunk of its
// own loaded when a terminal opens, output committed under
// internal/console/dist, whose names depend only on the files' contents.
import { defineConfig } from "vite";

export default defineConfig({
  esbuild: { jsx: "automatic", jsxImportSource: "preact", legalComments: "none" },
  build: {
    outDir: "../internal/console/dist",
    emptyOutDir: true,
    target: "es2022",
    modulePreload: { polyfill: false },
    reportCompressedSize: true,
    sourcemap: false,
  },
});
