//! Where `etw_trace()` events go: on Windows a TraceLogging event of the named provider
//! (registered once per provider GUID with `EventRegister`, its name given through
//! `EventSetInformation(EventProviderSetTraits)`, each event written by `EventWriteTransfer`
//! with the provider traits, the event metadata and the payload as its three data descriptors),
//! seen by any ETW session that enables the provider. Elsewhere there is no ETW: writing says
//! so and the event goes nowhere. The bytes come from [`crate::etw::tlg_event`].

use crate::etw::tlg_event::EtwEventDef;

/// Why an event was not written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EtwWriteError {
    /// This system has no ETW.
    NoEtw,
    /// The Windows call failed (its name and Win32 error code).
    Failed(String),
}

/// The providers `etw_trace()` has written to, registered until the writer is dropped.
#[derive(Default)]
pub struct EtwWriter {
    #[cfg(windows)]
    providers: std::collections::HashMap<crate::etw::record::Guid, windows::Provider>,
}

impl EtwWriter {
    pub fn new() -> Self {
        EtwWriter::default()
    }

    /// Writes one event of `def` with the given level, keyword and payload
    /// ([`EtwEventDef::payload`]).
    #[cfg(windows)]
    pub fn write(
        &mut self,
        def: &EtwEventDef,
        level: u8,
        keyword: u64,
        payload: &[u8],
    ) -> Result<(), EtwWriteError> {
        let p = match self.providers.entry(def.guid) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(windows::Provider::register(def)?)
            }
        };
        p.write(&def.metadata(), level, keyword, payload)
    }

    /// Writes one event: there is no ETW on this system, so nothing is written.
    #[cfg(not(windows))]
    pub fn write(
        &mut self,
        def: &EtwEventDef,
        level: u8,
        keyword: u64,
        payload: &[u8],
    ) -> Result<(), EtwWriteError> {
        let _ = (def, level, keyword, payload);
        Err(EtwWriteError::NoEtw)
    }
}

#[cfg(windows)]
mod windows {
    use super::EtwWriteError;
    use crate::etw::tlg_event::EtwEventDef;
    use windows_sys::core::GUID;
    use windows_sys::Win32::System::Diagnostics::Etw::{
        EventProviderSetTraits, EventRegister, EventSetInformation, EventUnregister,
        EventWriteTransfer, EVENT_DATA_DESCRIPTOR, EVENT_DATA_DESCRIPTOR_0,
        EVENT_DATA_DESCRIPTOR_0_0, EVENT_DATA_DESCRIPTOR_TYPE_EVENT_METADATA,
        EVENT_DATA_DESCRIPTOR_TYPE_NONE, EVENT_DATA_DESCRIPTOR_TYPE_PROVIDER_METADATA,
        EVENT_DESCRIPTOR, REGHANDLE,
    };

    /// The channel TraceLogging events carry (TraceLoggingProvider.h's `WINEVENT_CHANNEL_TRACELOGGING`).
    const CHANNEL_TRACELOGGING: u8 = 11;

    /// A registered provider and its traits blob (kept alive: ETW reads it at each write).
    pub(super) struct Provider {
        handle: REGHANDLE,
        traits: Vec<u8>,
    }

    fn descriptor(bytes: &[u8], kind: u32) -> EVENT_DATA_DESCRIPTOR {
        EVENT_DATA_DESCRIPTOR {
            Ptr: bytes.as_ptr() as u64,
            Size: bytes.len() as u32,
            Anonymous: EVENT_DATA_DESCRIPTOR_0 {
                Anonymous: EVENT_DATA_DESCRIPTOR_0_0 {
                    Type: kind as u8,
                    Reserved1: 0,
                    Reserved2: 0,
                },
            },
        }
    }

    impl Provider {
        pub(super) fn register(def: &EtwEventDef) -> Result<Provider, EtwWriteError> {
            let g = def.guid;
            let guid = GUID {
                data1: g.data1,
                data2: g.data2,
                data3: g.data3,
                data4: g.data4,
            };
            let mut handle: REGHANDLE = 0;
            // SAFETY: the GUID and handle outlive the call; no enable callback is given.
            let rc = unsafe { EventRegister(&guid, None, std::ptr::null(), &mut handle) };
            if rc != 0 {
                return Err(EtwWriteError::Failed(format!("EventRegister: error {rc}")));
            }
            let traits = def.provider_traits();
            // SAFETY: the handle was just registered; the blob lives as long as the provider.
            // A failure only loses the provider's name in decoders that read the traits.
            let _ = unsafe {
                EventSetInformation(
                    handle,
                    EventProviderSetTraits,
                    traits.as_ptr().cast(),
                    traits.len() as u32,
                )
            };
            Ok(Provider { handle, traits })
        }

        pub(super) fn write(
            &self,
            metadata: &[u8],
            level: u8,
            keyword: u64,
            payload: &[u8],
        ) -> Result<(), EtwWriteError> {
            let desc = EVENT_DESCRIPTOR {
                Id: 0,
                Version: 0,
                Channel: CHANNEL_TRACELOGGING,
                Level: level,
                Opcode: 0,
                Task: 0,
                Keyword: keyword,
            };
            let data = [
                descriptor(&self.traits, EVENT_DATA_DESCRIPTOR_TYPE_PROVIDER_METADATA),
                descriptor(metadata, EVENT_DATA_DESCRIPTOR_TYPE_EVENT_METADATA),
                descriptor(payload, EVENT_DATA_DESCRIPTOR_TYPE_NONE),
            ];
            // SAFETY: every descriptor points into a slice that outlives the call.
            let rc = unsafe {
                EventWriteTransfer(
                    self.handle,
                    &desc,
                    std::ptr::null(),
                    std::ptr::null(),
                    data.len() as u32,
                    data.as_ptr(),
                )
            };
            if rc != 0 {
                return Err(EtwWriteError::Failed(format!(
                    "EventWriteTransfer: error {rc}"
                )));
            }
            Ok(())
        }
    }

    impl Drop for Provider {
        fn drop(&mut self) {
            // SAFETY: the handle came from EventRegister and is unregistered once.
            unsafe {
                EventUnregister(self.handle);
            }
        }
    }
}
