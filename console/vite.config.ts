import { defineConfig } from "vite";

// `npm run dev` serves the console with hot reload and forwards the API, the webhooks and
// Socket.IO to a running stack (scripts/dev-up.sh's load balancer unless SB_API says
// otherwise). `npm run build` writes dist/, which the binary embeds (crates/api/src/console.rs).
const api = process.env.SB_API ?? "http://127.0.0.1:8080";
const proxied = [
  "/alerts",
  "/auth",
  "/expert-queue",
  "/conversations",
  "/customers",
  "/events",
  "/channel-connections",
  "/dead-letters",
  "/inbound-events",
  "/reports",
  "/health",
  "/openapi.json",
];

export default defineConfig({
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    // Everything is a file of its own: the CSP allows no data: URIs for scripts or styles.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
  server: {
    proxy: {
      ...Object.fromEntries(proxied.map((p) => [p, { target: api, changeOrigin: false }])),
      "/socket.io": { target: api, ws: true },
    },
  },
});
