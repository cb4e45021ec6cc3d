//! WGSL to SPIR-V through naga: the one compile both the build script (the
//! backend's own shaders, `build.rs` includes this file as a module) and
//! the extern kernel registry (`register_wgsl`, at run time) use, with the
//! same capabilities and options, so a shader compiles the same either
//! way.

/// `src` (the shader `name`) compiled to SPIR-V words, or naga's message.
pub fn wgsl_words(name: &str, src: &str) -> Result<Vec<u32>, String> {
    let module = naga::front::wgsl::parse_str(src).map_err(|e| {
        format!(
            "the WGSL of `{name}` does not parse: {}",
            e.emit_to_string(src)
        )
    })?;
    let caps = naga::valid::Capabilities::IMMEDIATES
        | naga::valid::Capabilities::SHADER_FLOAT16
        | naga::valid::Capabilities::FLOAT64
        | naga::valid::Capabilities::SHADER_INT64;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| {
            format!(
                "the WGSL of `{name}` does not validate: {}",
                e.emit_to_string(src)
            )
        })?;
    // Explicit flags: the default adds DEBUG in debug builds, and the output
    // must be the same in every profile.
    let opts = naga::back::spv::Options {
        lang_version: (1, 3),
        flags: naga::back::spv::WriterFlags::empty(),
        use_storage_input_output_16: false,
        ..Default::default()
    };
    naga::back::spv::write_vec(&module, &info, &opts, None)
        .map_err(|e| format!("the SPIR-V of `{name}` cannot be written: {e}"))
}
