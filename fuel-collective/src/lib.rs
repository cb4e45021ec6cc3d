//! fuel-collective: DeviceGroup collectives and the `lower-collectives` pass.
