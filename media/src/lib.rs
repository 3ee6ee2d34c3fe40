//! vidforge's media engine: FFmpeg demux/decode/encode/mux, the CPU compositor, the staged
//! pipeline, probing and previews. Knows nothing of MCP, tasks or JSON.
