//! The WhatsApp channel, through Twilio: `X-Twilio-Signature` checking and form parsing
//! inbound, the Messages API outbound.

mod inbound;
pub(crate) mod outbound;
#[cfg(test)]
mod proptests;

pub use inbound::{Whatsapp, verify_signature};

/// The provider behind the channel, by the name its stand-ins answer under (see
/// [`crate::provider`]): the fake Twilio API of `switchboard demo-providers` and of the
/// tests is served at `/{PROVIDER}/…`, where the scripts point `TWILIO_API_BASE`.
pub const PROVIDER: &str = "twilio";

/// The header Twilio signs its webhooks in (lowercase, as `http` names it).
pub const SIGNATURE_HEADER: &str = "x-twilio-signature";

#[cfg(test)]
mod tests {
    use crate::signing::{self, Signed};

    fn header<'a>(signed: &'a Signed, name: &str) -> &'a str {
        signed
            .headers
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, v)| v.as_str())
    }

    #[test]
    fn twilio_signs_url_and_sorted_params_as_documented() {
        // https://www.twilio.com/docs/usage/security
        let params = vec![
            ("To", "+18005551212".to_owned()),
            ("CallSid", "CA1234567890ABCDE".to_owned()),
            ("Digits", "1234".to_owned()),
            ("From", "+12349013030".to_owned()),
            ("Caller", "+12349013030".to_owned()),
        ];
        let signed = signing::whatsapp(
            "12345",
            "https://mycompany.com/myapp.php?foo=1&bar=2",
            params,
        );
        assert_eq!(
            header(&signed, "x-twilio-signature"),
            "0/KCTR6DLpKmkAf8muzZqo1nDgQ="
        );
    }
}
